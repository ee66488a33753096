"""The Slurm snapshot plan: which collector steps run in which stage for one job, under the snapshot engine.

Stage 1 reads the job; stage 2 its partition, nodes, steps, accounting, output and DCGM series; stage 3 the
pending-reason summary (which needs the partition and nodes) and, when asked, GPU probes on the job's nodes.
The engine gives every step the same deadline, per-call timeout, evidence allowance and concurrency cap as a
Kubernetes snapshot, and reports each collector as ok, partial, timeout, error or skipped.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from typing import Any

from bot.config import Settings
from bot.diagnosis.collectors import node_probe
from bot.diagnosis.collectors.fabric import nccl as fabric
from bot.diagnosis.collectors.gpu import dcgm_metrics
from bot.diagnosis.collectors.gpu import nvidia_smi as gpu
from bot.diagnosis.collectors.slurm import observations as observe
from bot.diagnosis.collectors.slurm.collector import involved_nodes, job_placement
from bot.diagnosis.collectors.slurm.model import Fetched, SlurmBackend, SlurmJob, SlurmNode, SlurmPartition
from bot.diagnosis.collectors.slurm.output import read_job_output
from bot.diagnosis.engine import Budget, CollectorFailure, Sink, Stage, Step
from bot.evidence.findings import CollectorOutcome, Observation, utcnow

MAX_PROBED_NODES = 4
PROBE_CAP_SECONDS = 60.0
TAIL_LINES_KEPT = 40


@dataclasses.dataclass(kw_only=True)
class SlurmContext:
    """What the Slurm steps of one snapshot share, filled stage by stage."""

    job_id: str
    backend: SlurmBackend
    settings: Settings
    budget: Budget
    probe_gpus: bool = False
    job: SlurmJob | None = None
    job_observation: Observation | None = None
    partition: SlurmPartition | None = None
    partition_states: dict[str, int] = dataclasses.field(default_factory=dict)
    nodes: list[SlurmNode] = dataclasses.field(default_factory=list)
    placement: dict[str, str] = dataclasses.field(default_factory=dict)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def found(self) -> bool:
        """Slurm answered and knows the job."""
        return self.job is not None


def _settle(sink: Sink, fetched: Fetched[Any], *, items: int) -> None:
    """A backend answer's outcome on the step: timed out, partial (some data and an error), error, or ok."""
    sink.count(items)
    if fetched.truncated:
        sink.truncate("output cut at the byte cap")
    if fetched.timed_out:
        raise CollectorFailure(outcome=CollectorOutcome.TIMEOUT, detail=fetched.error or "timed out")
    if fetched.error:
        if not items:
            raise CollectorFailure(outcome=CollectorOutcome.ERROR, detail=fetched.error)
        sink.mark(CollectorOutcome.PARTIAL, fetched.error)


def _read_job(ctx: SlurmContext, sink: Sink) -> None:
    version = ctx.backend.version()
    with ctx.lock:
        ctx.placement["slurm_backend"] = ctx.backend.name
        if version.data:
            ctx.placement["slurm_version"] = version.data
    fetched = ctx.backend.job(job_id=ctx.job_id)
    now = utcnow()
    if fetched.data is None:
        if not fetched.error:
            sink.observe(observe.job_not_found(job_id=ctx.job_id, fetched=fetched, now=now))
        _settle(sink, fetched, items=0)
        return
    job = fetched.data
    observation = observe.job_observation(job=job, fetched=fetched, now=now)
    with ctx.lock:
        ctx.job, ctx.job_observation = job, observation
        ctx.placement.update(job_placement(job))
    sink.observe(observation)
    _settle(sink, fetched, items=1)


def _read_partition(ctx: SlurmContext, job: SlurmJob, sink: Sink) -> None:
    # A job may name several partitions (`-p a,b`); the first is the one scontrol reports it in.
    fetched = ctx.backend.partition(name=(job.partition or "").split(",")[0])
    partition = fetched.data
    if partition is not None:
        states = ctx.backend.partition_node_states(name=partition.name).data
        with ctx.lock:
            ctx.partition, ctx.partition_states = partition, states
        sink.observe(
            observe.partition_observation(
                partition=partition, job=job, fetched=fetched, now=utcnow(), node_states=states
            )
        )
    _settle(sink, fetched, items=int(partition is not None))


def _read_nodes(ctx: SlurmContext, job: SlurmJob, sink: Sink) -> None:
    names = involved_nodes(job)
    capped = names[: ctx.settings.bounds.max_items_per_list]
    fetched = ctx.backend.nodes(names=capped)
    now = utcnow()
    with ctx.lock:
        ctx.nodes = list(fetched.data)
    for node in fetched.data:
        sink.observe(observe.node_observation(node=node, job=job, command=fetched.command, now=now))
        for xid in observe.drain_reason_xids(node=node, now=now):
            sink.observe(xid)
    if len(capped) < len(names):
        sink.truncate(f"looked at {len(capped)} of {len(names)} nodes (max_items_per_list)")
    _settle(sink, fetched, items=len(fetched.data))


def _read_steps(ctx: SlurmContext, job: SlurmJob, sink: Sink) -> None:
    fetched = ctx.backend.steps(job_id=job.job_id)
    now = utcnow()
    for step in fetched.data[: ctx.settings.bounds.max_items_per_list]:
        sink.observe(observe.step_observation(step=step, job=job, command=fetched.command, now=now, failing=False))
    _settle(sink, fetched, items=len(fetched.data))


def _read_accounting(ctx: SlurmContext, job: SlurmJob, sink: Sink) -> None:
    fetched = ctx.backend.accounting(job_id=job.job_id)
    accounting = fetched.data
    now = utcnow()
    sink.observe(observe.accounting_observation(accounting=accounting, fetched=fetched, now=now))
    if not accounting.enabled:
        sink.mark(CollectorOutcome.SKIPPED, f"accounting not enabled: {accounting.message}"[:300])
        return
    failing = observe.failing_step(accounting.steps)
    for step in accounting.steps[: ctx.settings.bounds.max_items_per_list]:
        sink.observe(
            observe.step_observation(step=step, job=job, command=fetched.command, now=now, failing=step is failing)
        )
    _settle(sink, fetched, items=len(accounting.steps))


def _read_output(ctx: SlurmContext, job: SlurmJob, sink: Sink) -> None:
    """The job's stdout tail as a log_tail observation plus any NCCL fabric errors in it."""
    observation = ctx.job_observation
    fields = observation.fields if observation is not None else {}
    # The path comes from the job record (untrusted): the reader opens it only if the file is the job user's own.
    text, note = read_job_output(
        path=fields.get("stdout_path"),
        job_id=job.job_id,
        job_uid=job.uid,
        max_bytes=ctx.settings.bounds.max_log_bytes_per_container,
    )
    if not text:
        sink.mark(CollectorOutcome.SKIPPED, note)
        return
    now = utcnow()
    host = job.batch_host or "batch-host"
    subject = observation.subject if observation is not None else f"slurm/job/{job.job_id}"
    lines = text.splitlines()
    sink.observe(
        Observation(
            source="slurm",
            kind="log_tail",
            subject=subject,
            text="\n".join(lines[-TAIL_LINES_KEPT:]),
            command=f"tail -n {TAIL_LINES_KEPT} {fields.get('stdout_path')}",
            observed_at=now,
            fields={"lines": len(lines), "bytes": len(text.encode()), "node": host, "note": note},
        )
    )
    found = fabric.fabric_observations(
        logs={host: text}, observed_at=now, subject=subject, max_events=ctx.settings.bounds.max_items_per_list
    )
    for item in found:
        sink.observe(item)
    sink.count(len(found) + 1)
    sink.note(note)


def _read_dcgm(ctx: SlurmContext, job: SlurmJob, sink: Sink) -> None:
    """DCGM exporter series for the job's nodes (allocated and waited-for), when Prometheus is configured."""
    settings = ctx.settings
    nodes = involved_nodes(job)[: settings.bounds.max_items_per_list]
    if not settings.prometheus_url or not nodes:
        sink.mark(
            CollectorOutcome.SKIPPED,
            "TRIAGE_PROMETHEUS_URL not set" if not settings.prometheus_url else "no nodes to look up",
        )
        return
    try:
        samples = dcgm_metrics.query_node_series(
            prometheus_url=settings.prometheus_url, nodes=nodes, timeout_seconds=ctx.budget.call_timeout()
        )
    except dcgm_metrics.MetricsUnavailable as error:
        raise CollectorFailure(outcome=CollectorOutcome.ERROR, detail=str(error)) from None
    for item in dcgm_metrics.dcgm_observations(
        samples=samples, observed_at=utcnow(), prometheus_url=settings.prometheus_url
    ):
        sink.observe(item)
    sink.count(len(samples))


def _pending_summary(ctx: SlurmContext, job: SlurmJob, sink: Sink) -> None:
    """Why a pending job waits, and what would unblock it (needs the partition and the nodes read before)."""
    with ctx.lock:
        partition, nodes, states = ctx.partition, list(ctx.nodes), dict(ctx.partition_states)
    sink.observe(
        observe.pending_observation(job=job, partition=partition, nodes=nodes, now=utcnow(), partition_node_states=states)
    )


def _probe_gpus(ctx: SlurmContext, job: SlurmJob, node: str, runner: node_probe.Runner, sink: Sink) -> None:
    """`nvidia-smi -q -x` on one of the job's nodes, within the probe cap and the snapshot's deadline."""
    cap = min(PROBE_CAP_SECONDS, max(0.5, ctx.budget.remaining()))
    try:
        result = node_probe.run_on_node(
            runner=runner, node=node, command=["nvidia-smi", "-q", "-x"], allow=True, time_cap_seconds=cap
        )
    except node_probe.ProbeNotAllowed as refused:
        sink.mark(CollectorOutcome.SKIPPED, str(refused))
        return
    if not result.ok:
        outcome = CollectorOutcome.TIMEOUT if result.timed_out else CollectorOutcome.ERROR
        raise CollectorFailure(outcome=outcome, detail=f"`{result.shown}`: {result.stderr.strip()[:200]}")
    try:
        smi = gpu.parse_nvidia_smi_xml(result.stdout)
    except gpu.GpuParseError as error:
        raise CollectorFailure(outcome=CollectorOutcome.ERROR, detail=str(error)) from None
    for item in gpu.gpu_observations(node=node, observed_at=utcnow(), smi=smi):
        sink.observe(item)
    sink.count(len(smi.gpus))


def _probe_steps(ctx: SlurmContext, job: SlurmJob) -> list[Step]:
    """One step per allocated node (the scheduler's record names them, never a log line)."""
    settings = ctx.settings
    try:
        runner = node_probe.make_runner(setting=settings.node_probe_runner, image=settings.node_probe_image)
    except ValueError as error:
        return [Step(collector="gpu.probe", run=functools.partial(_skip, note=str(error)))]
    if isinstance(runner, node_probe.SrunRunner) and job.state == "RUNNING":
        runner = node_probe.SrunRunner(job_id=job.job_id)  # inside the job's own allocation
    if runner is None:
        note = "TRIAGE_NODE_PROBE_RUNNER is off: no node probe ran (set srun or k8s-debug to allow it)"
        return [Step(collector="gpu.probe", run=functools.partial(_skip, note=note))]
    return [
        Step(collector=f"gpu.probe.{node}", run=functools.partial(_probe_gpus, ctx, job, node, runner))
        for node in list(job.nodes)[:MAX_PROBED_NODES]
    ]


def _skip(sink: Sink, *, note: str) -> None:
    sink.mark(CollectorOutcome.SKIPPED, note)


def plan(ctx: SlurmContext) -> Sequence[Stage]:
    """Stage 1 reads the job; stage 2 everything keyed by it; stage 3 what needs stage 2."""

    def stage_job() -> list[Step]:
        return [Step(collector="slurm.job", run=functools.partial(_read_job, ctx))]

    def stage_details() -> list[Step]:
        job = ctx.job
        if job is None:
            return []
        steps = []
        if job.partition:
            steps.append(Step(collector="slurm.partition", run=functools.partial(_read_partition, ctx, job)))
        if involved_nodes(job):
            steps.append(Step(collector="slurm.nodes", run=functools.partial(_read_nodes, ctx, job)))
        if job.state == "RUNNING":
            steps.append(Step(collector="slurm.steps", run=functools.partial(_read_steps, ctx, job)))
        if job.finished or job.state == "RUNNING":
            steps.append(Step(collector="slurm.accounting", run=functools.partial(_read_accounting, ctx, job)))
        # Another cluster's (`-M`) output paths name files on its hosts, not on this one: never read them here.
        if ctx.backend.name == "cli" and not ctx.settings.slurm_cluster:
            steps.append(Step(collector="slurm.output", run=functools.partial(_read_output, ctx, job)))
        steps.append(Step(collector="gpu.dcgm", run=functools.partial(_read_dcgm, ctx, job)))
        return steps

    def stage_summary() -> list[Step]:
        job = ctx.job
        if job is None:
            return []
        steps = []
        if job.pending:
            steps.append(Step(collector="slurm.job", run=functools.partial(_pending_summary, ctx, job)))
        if ctx.probe_gpus:
            steps.extend(_probe_steps(ctx, job))
        return steps

    return (stage_job, stage_details, stage_summary)


