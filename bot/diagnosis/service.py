"""One entry point for every snapshot (`/triage job <id>`, buttons, scheduled re-validation, the terminal):
the target's plan runs under the snapshot engine (one deadline and budget, one not-checked and truncation
account), the classifier reads what it found, and the report is redacted once before it leaves the core."""

from __future__ import annotations

import dataclasses
import tempfile
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.clusters.registry import Clusters
from bot.config import Settings
from bot.diagnosis import engine
from bot.diagnosis.collectors.kube import calls as kube_calls
from bot.evidence import redact
from bot.evidence.findings import (
    CollectorOutcome,
    CollectorReport,
    Evidence,
    Finding,
    Observation,
    Severity,
    utcnow,
)
from bot.evidence.node_targets import NodeTarget
from bot.evidence.report import Diagnoser, Diagnosis, SnapshotReport, SnapshotUnavailable
from bot.evidence.targets import Platform, Target, parse_target

ClusterUnreachable = kube_calls.ClusterUnreachable


class TargetNotFound(SnapshotUnavailable, LookupError):
    """No workload of any accepted kind has that name in that namespace (or Slurm does not know the job);
    the message names the kinds tried and, for `namespace/name`, how to name another kind."""


def classify(observations: Sequence[Observation]) -> Diagnosis:
    """The classifier: rules first, then what no rule explains."""
    from bot.diagnosis.classify import diagnose_observations

    return diagnose_observations(observations)


def diagnose(
    *,
    target: Target | str,
    settings: Settings,
    api_client: Any = None,
    slurm_backend: Any = None,
    probe_gpus: bool = False,
    clusters: Clusters | None = None,
) -> SnapshotReport:
    """Take one bounded snapshot of `target` on its cluster (with that cluster's access and bounds) and
    classify it; raises TargetNotFound / ClusterUnreachable / ClusterError. `clusters` is the registry (built
    from the settings when not given; the incident service holds each cluster's snapshot slots around this
    call); `api_client` and `slurm_backend` replace the ones built from the settings (tests, the lab)."""
    parsed = parse_target(target) if isinstance(target, str) else target
    registry = clusters or Clusters.from_settings(settings)
    spec = registry.spec_for(parsed)
    try:
        report = _diagnose_on(target=parsed, settings=registry.settings_for(spec, settings), api_client=api_client,
                              slurm_backend=slurm_backend, probe_gpus=probe_gpus)
    except ClusterUnreachable as exc:
        if registry.legacy:
            raise
        raise ClusterUnreachable(f"cluster {spec.name}: {exc}") from exc
    shown = registry.canonical(dataclasses.replace(parsed, cluster=spec.name))
    return dataclasses.replace(report, target=shown.key, cluster=spec.name)


def _diagnose_on(*, target: Target, settings: Settings, api_client: Any, slurm_backend: Any,
                 probe_gpus: bool) -> SnapshotReport:
    """One snapshot with settings already narrowed to the target's cluster."""
    taken_at = utcnow()
    budget = engine.Budget(bounds=settings.bounds)
    followed: tuple[str, ...] = ()
    node = isinstance(target, NodeTarget)
    if node:
        from bot.diagnosis import node_triage

        result, kind, placement = node_triage.collect(target=target, settings=settings, budget=budget,
                                                      api_client=api_client, slurm_backend=slurm_backend)
    elif target.platform is Platform.SLURM:
        result, kind, placement = _slurm(target=target, settings=settings, budget=budget, backend=slurm_backend,
                                         probe_gpus=probe_gpus)
    else:
        result, kind, followed = _kubernetes(target=target, settings=settings, budget=budget, api_client=api_client)
        placement = {}
    observations = _aged(list(result.observations) + _engine_observations(result.reports), now=taken_at)
    diagnosis = classify(observations)
    extra = _snapshot_findings(observations, already={f.rule for f in diagnosis.findings})
    if node:
        extra += node_triage.next_steps(target=target, observations=observations, diagnosis=diagnosis)
    return redact.redact_report(SnapshotReport(  # the one redaction step: whoever renders it, it leaves redacted
        target=target.key, target_kind=kind, taken_at=taken_at, elapsed_ms=budget.elapsed_ms(),
        verdict=diagnosis.verdict, findings=tuple(diagnosis.findings) + tuple(extra), collectors=result.reports,
        observations=tuple(observations), placement={**placement, **placement_from(observations)},
        not_checked=result.not_checked, unexplained=diagnosis.unexplained, followed=followed))


def _aged(observations: list[Observation], *, now: datetime) -> list[Observation]:
    """Every observation carries how long before the snapshot it was last true."""
    return [dataclasses.replace(item, age_seconds=max(0, int((now - item.observed_at).total_seconds())))
            for item in observations]


def _kubernetes(
    *, target: Target, settings: Settings, budget: engine.Budget, api_client: Any
) -> tuple[engine.SnapshotResult, str, tuple[str, ...]]:
    from bot.diagnosis.collectors.kube import history as kube_history
    from bot.diagnosis.collectors.kube import plan as kube_plan

    try:
        ctx = kube_plan.context_for(target=target, budget=budget, api_client=api_client,
                                    kubeconfig=settings.kubeconfig, kube_context=settings.kube_context,
                                    in_cluster=settings.in_cluster,
                                    gpu_operator_namespaces=settings.gpu_operator_namespace_list)
    except Exception as exc:
        raise ClusterUnreachable(
            f"no Kubernetes credentials ({exc}); set KUBECONFIG, or TRIAGE_IN_CLUSTER=true inside a cluster"
        ) from exc
    try:
        result = engine.run_snapshot(stages=kube_plan.plan(ctx), budget=budget)
    finally:
        if api_client is None:
            ctx.caller.api.close()  # we built it: release its connection pool (per snapshot, not per process)
    if ctx.unreachable:
        raise ClusterUnreachable(ctx.unreachable)
    workload_report = next((r for r in result.reports if r.name == "workload"), None)
    if ctx.workload is None and workload_report is not None and workload_report.outcome is CollectorOutcome.OK:
        missing = next((item for item in result.observations if item.kind == "workload_not_found"), None)
        raise TargetNotFound(missing.text if missing is not None else
                             f"no workload named {target.name} in namespace {target.namespace}")
    # The present over the past: resolved history is marked, and the target's health is stated once.
    marked = kube_history.mark(ctx, result.observations, now=utcnow())
    result = dataclasses.replace(result, observations=tuple(marked))
    kind = ctx.kind_name if ctx.workload is not None else (target.kind.value if target.kind else target.resource or "")
    return result, kind, tuple(ctx.followed)


def _slurm(
    *, target: Target, settings: Settings, budget: engine.Budget, backend: Any, probe_gpus: bool
) -> tuple[engine.SnapshotResult, str, dict[str, str]]:
    from bot.diagnosis.collectors.slurm import collector as slurm
    from bot.diagnosis.collectors.slurm.plan import SlurmContext, plan

    if backend is None:
        try:
            backend = slurm.make_backend(settings=settings)
        except ValueError as error:
            reason = str(error)
            skipped = engine.Step(collector="slurm", run=lambda sink: sink.mark(CollectorOutcome.SKIPPED, reason))
            return engine.run_snapshot(stages=[lambda: [skipped]], budget=budget), "slurm", {}
    ctx = SlurmContext(job_id=target.name, backend=backend, settings=settings, budget=budget, probe_gpus=probe_gpus)
    result = engine.run_snapshot(stages=plan(ctx), budget=budget)
    unknown = next((item for item in result.observations
                    if item.kind == "slurm_job" and item.fields.get("found") is False), None)
    if unknown is not None:
        raise TargetNotFound(unknown.text)
    return result, "slurm", ctx.placement


def _engine_observations(reports: Sequence[CollectorReport]) -> list[Observation]:
    """What the snapshot could not see is itself evidence: 403s and incomplete collectors."""
    now = utcnow()
    items = []
    for report in reports:
        if report.outcome is CollectorOutcome.FORBIDDEN:
            items.append(Observation(
                source="snapshot", kind="api_forbidden", subject=f"collector/{report.name}",
                text=f"RBAC denied the {report.name} collector: {report.detail}",
                command="kubectl auth can-i --list --as=system:serviceaccount:<ns>:triage-bot", observed_at=now,
                fields={"collector": report.name, "status": 403, "message": report.detail}))
        elif report.outcome in (CollectorOutcome.TIMEOUT, CollectorOutcome.ERROR, CollectorOutcome.PARTIAL):
            items.append(Observation(
                source="snapshot", kind="collector_incomplete", subject=f"collector/{report.name}",
                text=f"{report.name} collector {report.outcome.value}: {report.detail}", command="",
                observed_at=now, fields={"collector": report.name, "outcome": report.outcome.value,
                                         "detail": report.detail}))
    return items


def _snapshot_findings(observations: Sequence[Observation], *, already: set[str]) -> list[Finding]:
    """Permission and missing-API findings the responder must know, whatever the classifier concluded."""
    findings = []
    for item in observations:
        if item.kind == "api_forbidden" and "snapshot.forbidden" not in already:
            summary = f"The bot may not read everything: {item.text}"
            next_step = ("Grant the bot's ServiceAccount read access (get/list/watch) for this resource, or run "
                         "the kubectl command yourself")
            expected, rule = "200 OK", "snapshot.forbidden"
        elif item.kind == "api_group_missing" and "snapshot.api_group_missing" not in already:
            summary = item.text
            next_step = f"Check the CRD is installed: {item.command}"
            expected, rule = "API group served", "snapshot.api_group_missing"
        else:
            continue
        findings.append(Finding(
            layer=None, rule=rule, severity=Severity.MEDIUM, summary=summary, subject=item.subject,
            next_step=next_step, evidence=(Evidence(source=item.source, command=item.command, excerpt=item.text,
                                                    observed_at=item.observed_at, expected=expected,
                                                    observed=str(item.fields.get("status", ""))),)))
    return findings


def placement_from(observations: Sequence[Observation]) -> dict[str, str]:
    """The handoff's versions-and-placement facts: images with digests, nodes, GPU products, driver/CUDA/NCCL."""
    placement: dict[str, list[str]] = {}

    def add(key: str, value: Any) -> None:
        if value in (None, "", {}):
            return
        values = placement.setdefault(key, [])
        if str(value) not in values:
            values.append(str(value))

    for item in observations:
        fields = item.fields
        if item.kind == "container_state":
            digest = (fields.get("image_id") or "").rpartition("@")[2]
            add(f"image:{fields.get('container')}", f"{fields.get('image')}" + (f"@{digest}" if digest else ""))
        elif item.kind == "container_spec":
            if f"image:{fields.get('container')}" not in placement:
                add(f"image:{fields.get('container')}", fields.get("image"))
            for name, value in sorted((fields.get("env") or {}).items()):
                add(f"env:{name}", value)
        elif item.kind == "pod_phase":
            add("nodes", fields.get("node"))
        elif item.kind == "node_capacity":
            node = item.subject.removeprefix("node/")
            add(f"gpu_product:{node}", fields.get("gpu_product"))
            add(f"driver:{node}", fields.get("driver_version"))
            add(f"cuda:{node}", fields.get("cuda_version"))
            add(f"kubelet:{node}", fields.get("kubelet_version"))
        elif item.kind == "log_line" and fields.get("nccl_version"):
            add("nccl_version", fields["nccl_version"])
    return {key: ", ".join(values) for key, values in placement.items()}


class _LabServers:
    """Lab API servers started on demand for the demo, one per scenario, alive for the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kubeconfigs: dict[str, Path] = {}
        self._servers: list[Any] = []

    def kubeconfig(self, scenario: str) -> Path:
        from bot.lab import kube_api, scenarios

        with self._lock:
            if scenario not in self._kubeconfigs:
                server = kube_api.KubeApiServer(state=scenarios.build(scenario).state).start()
                self._servers.append(server)
                folder = Path(tempfile.mkdtemp(prefix=f"triage-lab-{scenario}-"))
                self._kubeconfigs[scenario] = server.write_kubeconfig(path=folder / "kubeconfig")
            return self._kubeconfigs[scenario]


_LAB = _LabServers()


def lab_diagnoser(*, scenario: str = "nccl-ib") -> Diagnoser:
    """A Diagnoser bound to a lab cluster (started on first use): the demo runs the real engine against it."""

    def run(*, target: Target | str, settings: Settings, **_: Any) -> SnapshotReport:
        lab_settings = settings.model_copy(update={"kubeconfig": _LAB.kubeconfig(scenario), "kube_context": None,
                                                   "in_cluster": False, "clusters_file": None,
                                                   "clusters_inline": None})
        return diagnose(target=target, settings=lab_settings)

    return run
