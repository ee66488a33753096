"""AIPerfJob status (aiperf.nvidia.com): phase, subPhase, error, conditions and live metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.diagnosis.collectors.kube.calls import observation, parse_time
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import Sink
from bot.evidence.findings import CollectorOutcome
from bot.evidence.targets import WorkloadKind


def _metric(metrics: dict[str, Any], name: str, *keys: str) -> float | None:
    value = metrics.get(name)
    if isinstance(value, dict):
        for key in keys:
            if isinstance(value.get(key), int | float):
                return float(value[key])
        return None
    return float(value) if isinstance(value, int | float) else None


def collect_aiperf(ctx: KubeContext, sink: Sink) -> None:
    """Observe the AIPerfJob's status; skipped for other kinds (no API call: the workload stage read it)."""
    if ctx.kind is not WorkloadKind.AIPERFJOB or ctx.workload is None:
        sink.mark(CollectorOutcome.SKIPPED, "the target is not an AIPerfJob")
        return
    workload = ctx.workload
    status = workload.get("status") or {}
    metrics = (status.get("liveMetrics") or {}).get("metrics") or {}
    created = parse_time((workload.get("metadata") or {}).get("creationTimestamp"))
    fields = {
        "phase": status.get("phase"), "subPhase": status.get("subPhase"), "error": status.get("error") or None,
        "workers": status.get("workers"),
        "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                       for c in status.get("conditions") or []],
        "request_error_rate": _metric(metrics, "request_error_rate", "avg", "value"),
        "requests_completed": _metric(metrics, "requests_completed", "value", "avg"),
        "age_seconds": int((datetime.now(UTC) - created).total_seconds()),
    }
    sink.count(1)
    parts = [f"AIPerfJob {ctx.namespace}/{ctx.target.name} phase {fields['phase']}"]
    if fields["subPhase"]:
        parts.append(f"subPhase {fields['subPhase']}")
    if fields["request_error_rate"] is not None:
        parts.append(f"request_error_rate.avg {fields['request_error_rate']}%")
    if fields["error"]:
        parts.append(f"error: {fields['error']}")
    sink.observe(observation(
        kind="aiperf_status", source="aiperf", subject=ctx.subject, fields=fields,
        command=f"kubectl get aiperfjob {ctx.target.name} -n {ctx.namespace} -o json | jq '{{phase: .status.phase, "
                f"subPhase: .status.subPhase, workers: .status.workers, error: .status.error, "
                f"conditions: .status.conditions}}'",
        text=", ".join(parts)))
