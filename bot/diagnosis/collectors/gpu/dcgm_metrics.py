"""GPU health the cluster already publishes: DCGM exporter series in Prometheus, read for a few nodes.

Read-only HTTP GETs to `/api/v1/query` with a timeout and a body cap; runs only when
`TRIAGE_PROMETHEUS_URL` is set. dcgm-exporter labels each series with `Hostname` and `gpu`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from datetime import datetime

import requests

from bot.diagnosis.knowledge import xid as gpu_xid
from bot.evidence import findings

_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
# (metric, what a non-zero value means); names as dcgm-exporter's default counters CSV ships them.
SERIES = {
    "DCGM_FI_DEV_XID_ERRORS": "value of the last Xid error",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "rows remapped for uncorrectable errors",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "row remapping failed",
}
# A node triage also reads ECC and NVLink error counters (in dcgm-exporter's CSV, commented out by default).
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
NVLINK_ERRORS = {
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "NVLink error counter: CRC flit errors",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "NVLink error counter: CRC data errors",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "NVLink error counter: replay errors",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "NVLink error counter: recovery errors",
}
NODE_SERIES = {**SERIES, ECC_DBE: "volatile double-bit (uncorrectable) ECC errors", **NVLINK_ERRORS}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sample:
    """One series value for one GPU on one node."""

    metric: str
    node: str
    gpu: str
    value: float
    labels: dict[str, str]


class MetricsUnavailable(RuntimeError):
    """Prometheus did not answer usefully; the message says why."""


def query_node_series(
    *,
    prometheus_url: str,
    nodes: Sequence[str],
    timeout_seconds: float,
    max_bytes: int = 2_000_000,
    session: requests.Session | None = None,
    series: Sequence[str] = tuple(SERIES),
) -> list[Sample]:
    """The `series` (SERIES by default) for these nodes: one PromQL query per metric, nodes in one label regex."""
    names = [node for node in nodes if _NODE.fullmatch(node)]
    if not names:
        return []
    # Names are [A-Za-z0-9._-]; only "." is special in RE2, and a PromQL string needs its backslash doubled.
    regex = "|".join(name.replace(".", "\\\\.") for name in names)
    http = session or requests.Session()
    samples: list[Sample] = []
    for metric in series:
        query = f'{metric}{{Hostname=~"{regex}"}}'
        try:
            with http.get(
                f"{prometheus_url.rstrip('/')}/api/v1/query",
                params={"query": query},
                timeout=timeout_seconds,
                stream=True,
            ) as response:
                body = response.raw.read(max_bytes + 1, decode_content=True)
                status = response.status_code
        except requests.RequestException as error:
            raise MetricsUnavailable(f"Prometheus unreachable: {type(error).__name__}") from None
        if len(body) > max_bytes:
            raise MetricsUnavailable(f"Prometheus answer for {metric} is larger than {max_bytes} bytes")
        try:
            data = json.loads(body)
        except ValueError:
            raise MetricsUnavailable(
                f"Prometheus answered HTTP {status} with a body that is not JSON"
            ) from None
        if data.get("status") != "success":
            raise MetricsUnavailable(f"Prometheus error for {metric}: {data.get('error', status)}")
        for item in (data.get("data") or {}).get("result") or []:
            labels = {str(key): str(value) for key, value in (item.get("metric") or {}).items()}
            try:
                value = float(item["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            samples.append(
                Sample(
                    metric=metric,
                    node=labels.get("Hostname", ""),
                    gpu=labels.get("gpu", ""),
                    value=value,
                    labels=labels,
                )
            )
    return samples


def dcgm_observations(
    *, samples: Sequence[Sample], observed_at: datetime, prometheus_url: str
) -> list[findings.Observation]:
    """Non-zero DCGM series as gpu_xid / gpu_health observations (zero means nothing to report)."""
    result: list[findings.Observation] = []
    for sample in samples:
        if sample.value == 0:
            continue
        command = f"curl -G {prometheus_url}/api/v1/query --data-urlencode 'query={sample.metric}{{Hostname=\"{sample.node}\"}}'"
        if sample.metric == "DCGM_FI_DEV_XID_ERRORS":
            code = int(sample.value)
            info = gpu_xid.lookup(code)
            result.append(
                findings.Observation(
                    source="gpu",
                    kind="gpu_xid",
                    subject=f"node:{sample.node}",
                    text=f"{sample.node} GPU {sample.gpu}: last Xid {code} ({info.name}) per DCGM exporter: {info.action}",
                    command=command,
                    observed_at=observed_at,
                    fields={
                        "node": sample.node,
                        "xid": code,
                        "known": info.known,
                        "name": info.name,
                        "meaning": info.meaning,
                        "usual_cause": info.usual_cause,
                        "action": info.action,
                        "drain": info.drain,
                        "xid_source": info.source,
                        "evidence": "dcgm_exporter",
                        "gpu_index": sample.gpu,
                        "gpu_pci": sample.labels.get("pci_bus_id"),
                        "uuid": sample.labels.get("UUID"),
                        "layer": "fabric" if code == 74 else "runtime",
                    },
                )
            )
        elif sample.metric == ECC_DBE or sample.metric in NVLINK_ERRORS:
            result.append(_counter_observation(sample=sample, command=command, observed_at=observed_at))
        else:
            failed = sample.metric == "DCGM_FI_DEV_ROW_REMAP_FAILURE"
            result.append(
                findings.Observation(
                    source="gpu",
                    kind="gpu_health",
                    subject=f"gpu:{sample.node}/{sample.gpu}",
                    text=f"{sample.node} GPU {sample.gpu}: {SERIES[sample.metric]} ({sample.metric}={sample.value:g})",
                    command=command,
                    observed_at=observed_at,
                    fields={
                        "node": sample.node,
                        "check": "dcgm-exporter",
                        "gpu_index": sample.gpu,
                        "metric": sample.metric,
                        "value": sample.value,
                        "status": "failed" if failed else "degraded",
                        "problems": [SERIES[sample.metric]],
                        "remapped_rows_failure": failed or None,
                        "uuid": sample.labels.get("UUID"),
                        "layer": "runtime",
                    },
                )
            )
    return result


def _counter_observation(*, sample: Sample, command: str, observed_at: datetime) -> findings.Observation:
    """An ECC or NVLink error counter above zero, worded and shaped for the gpu-ecc / nvlink rules."""
    nvlink = sample.metric in NVLINK_ERRORS
    what = NODE_SERIES[sample.metric]
    fields = {
        "node": sample.node,
        "check": "dcgm-exporter",
        "gpu_index": sample.gpu,
        "metric": sample.metric,
        "value": sample.value,
        "status": "degraded",
        "problems": [what],
        "uuid": sample.labels.get("UUID"),
        "layer": "fabric" if nvlink else "runtime",
    }
    if not nvlink:
        fields["ecc_volatile_dbe"] = sample.value
    return findings.Observation(
        source="gpu",
        kind="gpu_health",
        subject=f"gpu:{sample.node}/{sample.gpu}",
        text=f"{sample.node} GPU {sample.gpu}: {what} ({sample.metric}={sample.value:g})",
        command=command,
        observed_at=observed_at,
        fields=fields,
    )
