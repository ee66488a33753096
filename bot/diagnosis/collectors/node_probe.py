"""Opt-in, bounded on-node probes (nvidia-smi, Xid lines, ibstat, ib_write_bw, iperf3, all_reduce_perf).

Nothing here runs unless the operator configured a runner (`TRIAGE_NODE_PROBE_RUNNER=srun|k8s-debug`) AND the
caller passes `allow=True` with a time cap. Runners: `srun -w <node>` on Slurm, or a one-shot privileged
debug pod pinned to the node (`kubectl run --overrides=<pod template>`, with the configured kubeconfig and
context), both killed at the cap. The k8s-debug runner CREATES pods: the one exception to the bot's
read-only cluster access, opt-in, with its own RBAC in the chart (`nodeProbe.rbac.create`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Protocol

from bot.config import Settings
from bot.diagnosis.collectors.bounded_run import RunResult, run_bounded
from bot.evidence import findings

MAX_TIME_CAP_SECONDS = 300.0
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


class ProbeNotAllowed(PermissionError):
    """The probe was not explicitly allowed, no runner is configured, or the cap is missing/too large."""


class Runner(Protocol):
    """Runs one argv on one node inside a time cap."""

    name: str

    def argv(self, *, node: str, command: Sequence[str], time_cap_seconds: float) -> list[str]:
        """The full argv that runs `command` on `node`."""
        ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class SrunRunner:
    """`srun -w <node> -N1 -n1 --time=<cap>`: Slurm allocates, runs and kills at the cap."""

    partition: str | None = None
    job_id: str | None = None  # run inside this running job's allocation (`--jobid --overlap`)
    name: str = "srun"

    def argv(self, *, node: str, command: Sequence[str], time_cap_seconds: float) -> list[str]:
        minutes = max(1, int((time_cap_seconds + 59) // 60))
        argv = ["srun", "-w", node, "-N1", "-n1", f"--time={minutes}", "--immediate=10", "--quiet"]
        if self.job_id:
            argv += [f"--jobid={self.job_id}", "--overlap"]
        elif self.partition:
            argv += ["-p", self.partition]
        return [*argv, "--", *command]


@dataclasses.dataclass(frozen=True, kw_only=True)
class KubeDebugRunner:
    """A one-shot pod pinned to the node from a template (privileged, host PID/network), removed afterwards."""

    image: str
    namespace: str = "default"
    name: str = "k8s-debug"
    kubeconfig: str | None = None  # the bot's configured cluster, never kubectl's ambient default
    context: str | None = None
    extra_template: dict[str, Any] = dataclasses.field(default_factory=dict)

    def pod_template(self, *, node: str, command: Sequence[str], time_cap_seconds: float) -> dict[str, Any]:
        """The pod spec the runner creates; `activeDeadlineSeconds` enforces the cap server-side too."""
        spec: dict[str, Any] = {
            "nodeName": node,
            "hostPID": True,
            "hostNetwork": True,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": int(time_cap_seconds),
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "probe",
                    "image": self.image,
                    "command": list(command),
                    "securityContext": {"privileged": True},
                    "volumeMounts": [{"name": "dev", "mountPath": "/dev"}],
                }
            ],
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}],
        }
        spec.update(self.extra_template)
        return {"apiVersion": "v1", "spec": spec}

    def argv(self, *, node: str, command: Sequence[str], time_cap_seconds: float) -> list[str]:
        overrides = json.dumps(
            self.pod_template(node=node, command=command, time_cap_seconds=time_cap_seconds)
        )
        pod = f"triage-probe-{re.sub(r'[^a-z0-9-]', '-', node.lower())[:40]}"
        cluster = [f"--kubeconfig={self.kubeconfig}"] if self.kubeconfig else []
        cluster += [f"--context={self.context}"] if self.context else []
        return [
            "kubectl",
            *cluster,
            "run",
            pod,
            "-n",
            self.namespace,
            "--rm",
            "--attach",
            "--quiet",
            "--restart=Never",
            f"--image={self.image}",
            f"--pod-running-timeout={int(time_cap_seconds)}s",
            f"--overrides={overrides}",
        ]


def make_runner(
    *,
    setting: str,
    image: str | None = None,
    partition: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str = "default",
) -> Runner | None:
    """The runner `TRIAGE_NODE_PROBE_RUNNER` names, or None when it is `off`."""
    kind = setting.strip().lower()
    if kind in {"", "off"}:
        return None
    if kind == "srun":
        return SrunRunner(partition=partition)
    if kind == "k8s-debug":
        if not image:
            raise ValueError("the k8s-debug runner needs a probe image (with nvidia-smi / perftest)")
        return KubeDebugRunner(image=image, kubeconfig=kubeconfig, context=context, namespace=namespace or "default")
    raise ValueError(f"unknown node probe runner `{setting}`: use off, srun or k8s-debug")


def runner_for(*, settings: Settings) -> Runner | None:
    """The configured runner, pointed at the bot's configured cluster (kubeconfig and context; in-cluster,
    kubectl uses the pod's service account)."""
    return make_runner(
        setting=settings.node_probe_runner,
        image=settings.node_probe_image,
        kubeconfig=None if settings.in_cluster or settings.kubeconfig is None else str(settings.kubeconfig),
        context=None if settings.in_cluster else settings.kube_context,
        namespace=settings.node_probe_namespace,
    )


def run_on_node(
    *,
    runner: Runner | None,
    node: str,
    command: Sequence[str],
    allow: bool,
    time_cap_seconds: float | None,
    max_bytes: int = 1_000_000,
) -> RunResult:
    """Run one probe command on one node; refuses unless allowed, a runner exists and a cap within bounds is set."""
    if not allow:
        raise ProbeNotAllowed(
            "node probes run only when explicitly allowed (e.g. `/triage fabric ... --probe`)"
        )
    if runner is None:
        raise ProbeNotAllowed(
            "no node probe runner configured: set TRIAGE_NODE_PROBE_RUNNER=srun or k8s-debug"
        )
    if time_cap_seconds is None or not 0 < time_cap_seconds <= MAX_TIME_CAP_SECONDS:
        raise ProbeNotAllowed(f"a time cap between 0 and {MAX_TIME_CAP_SECONDS:g} seconds is required")
    if not _NODE_NAME.fullmatch(node):
        raise ValueError(f"not a node name: {node[:60]!r}")
    argv = runner.argv(node=node, command=command, time_cap_seconds=time_cap_seconds)
    # A little slack over the cap for the runner's own start-up; the runner enforces the cap too.
    return run_bounded(argv=argv, timeout_seconds=time_cap_seconds + 15, max_bytes=max_bytes)


# ---------------------------------------------------------------- probe outputs


@dataclasses.dataclass(frozen=True, kw_only=True)
class IbPort:
    """One `ibstat` port."""

    hca: str
    port: str
    state: str
    physical_state: str
    rate_gbps: float | None
    link_layer: str


def parse_ibstat(text: str) -> list[IbPort]:
    """`ibstat`: CA blocks with Port blocks (State, Physical state, Rate, Link layer)."""
    ports: list[IbPort] = []
    hca = ""
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if match := re.match(r"^CA '([^']+)'", line.strip()):
            hca = match.group(1)
        elif match := re.match(r"^Port (\d+):", line.strip()):
            if current is not None:
                ports.append(_port(current))
            current = {"hca": hca, "port": match.group(1)}
        elif current is not None and ":" in line:
            key, _, value = line.strip().partition(":")
            current[key.strip().lower()] = value.strip()
    if current is not None:
        ports.append(_port(current))
    return ports


def _port(raw: dict[str, str]) -> IbPort:
    rate = re.match(r"\d+(?:\.\d+)?", raw.get("rate", ""))
    return IbPort(
        hca=raw["hca"],
        port=raw["port"],
        state=raw.get("state", ""),
        physical_state=raw.get("physical state", ""),
        rate_gbps=float(rate.group(0)) if rate else None,
        link_layer=raw.get("link layer", ""),
    )


def parse_ib_write_bw(text: str) -> float | None:
    """perftest result row under `#bytes #iterations BW peak[..] BW average[..] MsgRate` -> average in Gb/s."""
    value = None
    per_gbit = 1.0
    for line in text.splitlines():
        if "BW average[" in line:
            per_gbit = 1.0 if "BW average[Gb/sec]" in line else 8 / 1000  # MB/sec -> Gb/s
            continue
        cells = line.split()
        if len(cells) >= 5 and cells[0].isdigit() and re.fullmatch(r"\d+(\.\d+)?", cells[3]):
            value = round(float(cells[3]) * per_gbit, 3)
    return value


def parse_iperf3_json(text: str) -> float | None:
    """`iperf3 -J` -> received Gbit/s."""
    try:
        data = json.loads(text)
        return float(data["end"]["sum_received"]["bits_per_second"]) / 1e9
    except (ValueError, KeyError, TypeError):
        return None


def parse_all_reduce_perf(text: str) -> float | None:
    """nccl-tests `# Avg bus bandwidth    : 180.52` -> GB/s."""
    match = re.search(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+)", text)
    return float(match.group(1)) if match else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Baseline:
    """A recorded expected value for one probe on this fabric, and where it came from."""

    probe: str
    expected: float
    unit: str
    source: str
    degraded_below: float = 0.9
    failed_below: float = 0.5


def compare(*, baseline: Baseline, observed: float | None) -> tuple[float | None, str]:
    """(observed/expected, verdict ok|degraded|failed|not_run)."""
    if observed is None:
        return None, "not_run"
    ratio = observed / baseline.expected if baseline.expected else None
    if ratio is None:
        return None, "not_run"
    verdict = (
        "ok"
        if ratio >= baseline.degraded_below
        else "degraded"
        if ratio >= baseline.failed_below
        else "failed"
    )
    return round(ratio, 3), verdict


def probe_observation(
    *,
    probe: str,
    nodes: Sequence[str],
    baseline: Baseline,
    observed: float | None,
    result: RunResult,
    time_cap_seconds: float,
    observed_at: datetime,
) -> findings.Observation:
    """One fabric_probe observation: expected vs observed and the ratio, with the exact command run."""
    ratio, verdict = compare(baseline=baseline, observed=observed)
    if result.timed_out:
        verdict = "not_run" if observed is None else verdict
    text = (
        f"{probe} {' <-> '.join(nodes)}: observed {observed if observed is not None else 'nothing'} "
        f"{baseline.unit}, expected {baseline.expected:g} {baseline.unit}"
        + (f" (ratio {ratio:.2f}, {verdict})" if ratio is not None else f" ({verdict})")
    )
    if result.timed_out:
        text += f"; stopped at the {time_cap_seconds:g}s cap"
    return findings.Observation(
        source="fabric",
        kind="fabric_probe",
        subject=f"probe:{probe}",
        text=text,
        command=result.shown,
        observed_at=observed_at,
        fields={
            "probe": probe,
            "nodes": list(nodes),
            "expected": baseline.expected,
            "observed": observed,
            "unit": baseline.unit,
            "ratio": ratio,
            "verdict": verdict,
            "baseline": baseline.source,
            "command": result.shown,
            "time_cap_s": time_cap_seconds,
            "exit_code": result.returncode,
            "timed_out": result.timed_out,
            "layer": "fabric",
        },
    )


def ib_link_observations(
    *, node: str, ports: Sequence[IbPort], expected_rate_gbps: float | None, observed_at: datetime
) -> list[findings.Observation]:
    """One ib_link observation per port, naming the problem when the port is down or below rate."""
    result = []
    for port in ports:
        problem = None
        if port.state and port.state.lower() != "active":
            problem = f"port state {port.state}"
        elif port.physical_state and port.physical_state.lower() != "linkup":
            problem = f"physical state {port.physical_state}"
        elif expected_rate_gbps and port.rate_gbps is not None and port.rate_gbps < expected_rate_gbps:
            problem = f"rate {port.rate_gbps:g} Gb/s below the expected {expected_rate_gbps:g}"
        result.append(
            findings.Observation(
                source="fabric",
                kind="ib_link",
                subject=f"node:{node}/{port.hca}:{port.port}",
                text=f"{node} {port.hca} port {port.port}: {port.state}/{port.physical_state} {port.rate_gbps} Gb/s"
                + (f" - {problem}" if problem else ""),
                command=f"ibstat {port.hca} {port.port}",
                observed_at=observed_at,
                fields={
                    "node": node,
                    "host": node,
                    "hca": port.hca,
                    "port": port.port,
                    "state": port.state,
                    "physical_state": port.physical_state,
                    "rate_gbps": port.rate_gbps,
                    "expected_rate_gbps": expected_rate_gbps,
                    "link_layer": port.link_layer,
                    "problem": problem,
                    "layer": "fabric",
                },
            )
        )
    return result


def run_pair_bandwidth(
    *,
    runner: Runner | None,
    server: str,
    client: str,
    allow: bool,
    time_cap_seconds: float,
    hca: str | None = None,
    duration_seconds: int = 10,
) -> tuple[RunResult, RunResult]:
    """`ib_write_bw` server on one node and client on the other, at the same time, both under the cap."""
    server_cmd = ["ib_write_bw", "-D", str(duration_seconds), "--report_gbits"] + (["-d", hca] if hca else [])
    client_cmd = [*server_cmd, server]
    with ThreadPoolExecutor(max_workers=2) as pool:
        server_future = pool.submit(
            run_on_node,
            runner=runner,
            node=server,
            command=server_cmd,
            allow=allow,
            time_cap_seconds=time_cap_seconds,
        )
        time.sleep(2)  # let the server listen before the client connects
        client_future = pool.submit(
            run_on_node,
            runner=runner,
            node=client,
            command=client_cmd,
            allow=allow,
            time_cap_seconds=time_cap_seconds,
        )
        return server_future.result(), client_future.result()
