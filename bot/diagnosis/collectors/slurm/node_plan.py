"""The Slurm node snapshot plan: the node's state and reason, the jobs on it now, and its DCGM series.

Stage 1 reads the node (`scontrol show node <name>` or slurmrestd); stage 2, concurrently, the jobs running
on it (the blast radius of a drain) and the DCGM exporter's Xid/ECC/NVLink series when Prometheus is
configured. Same engine, deadline, per-call timeout and evidence allowance as a job snapshot.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from typing import Any

from bot.config import Settings
from bot.diagnosis.collectors.gpu import node_series
from bot.diagnosis.collectors.slurm import node_jobs
from bot.diagnosis.collectors.slurm import observations as observe
from bot.diagnosis.collectors.slurm.model import Fetched, SlurmBackend, SlurmNode
from bot.diagnosis.engine import Budget, CollectorFailure, Sink, Stage, Step
from bot.diagnosis.knowledge import xid as gpu_xid
from bot.evidence.findings import CollectorOutcome, Observation, utcnow
from bot.evidence.node_targets import NodeTarget

MAX_JOBS_LISTED = 50
_NODE_OUTPUT_BYTES = 256_000


@dataclasses.dataclass(kw_only=True)
class SlurmNodeContext:
    """What the Slurm node steps share."""

    target: NodeTarget
    backend: SlurmBackend
    settings: Settings
    budget: Budget
    node: SlurmNode | None = None
    placement: dict[str, str] = dataclasses.field(default_factory=dict)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        """The node's name."""
        return self.target.name


def _fail_on(fetched: Fetched[Any], *, items: int, sink: Sink) -> None:
    sink.count(items)
    if fetched.truncated:
        sink.truncate("output cut at the byte cap")
    if fetched.timed_out:
        raise CollectorFailure(outcome=CollectorOutcome.TIMEOUT, detail=fetched.error or "timed out")
    if fetched.error and not items:
        raise CollectorFailure(outcome=CollectorOutcome.ERROR, detail=fetched.error)
    if fetched.error:
        sink.mark(CollectorOutcome.PARTIAL, fetched.error)


def _read_node(ctx: SlurmNodeContext, sink: Sink) -> None:
    version = ctx.backend.version()
    with ctx.lock:
        ctx.placement["slurm_backend"] = ctx.backend.name
        if version.data:
            ctx.placement["slurm_version"] = version.data
    fetched = ctx.backend.nodes(names=[ctx.name])
    node = next((item for item in fetched.data if item.name == ctx.name), None)
    now = utcnow()
    if node is None:
        said = f"{fetched.error} {fetched.excerpt}"
        unknown = not fetched.error or "Invalid node name" in said or f"Node {ctx.name} not found" in said
        if unknown:
            sink.observe(Observation(
                source="slurm", kind="slurm_node_not_found", subject=f"node:{ctx.name}",
                text=f"Slurm has no node named {ctx.name}", command=f"scontrol show node {ctx.name}",
                observed_at=now, fields={"node": ctx.name, "found": False}))
            sink.mark(CollectorOutcome.OK, "node not found")
            return
        _fail_on(fetched, items=0, sink=sink)
        return
    with ctx.lock:
        ctx.node = node
        if node.gres:
            ctx.placement[f"slurm_gres:{node.name}"] = node.gres
    sink.observe(node_observation(node=node, command=f"scontrol show node {node.name}", now=now))
    for item in observe.drain_reason_xids(node=node, now=now):
        sink.observe(item)
    _fail_on(fetched, items=1, sink=sink)


def node_observation(*, node: SlurmNode, command: str, now: Any) -> Observation:
    """The node's scheduler view without a job: state flags, reason (who, when), GRES configured vs used."""
    state = "+".join((node.state, *node.state_flags))
    gpus_configured = node.cfg_tres.get("gres/gpu")
    gpus_allocated = node.alloc_tres.get("gres/gpu")
    fields = {
        "node": node.name, "state": node.state, "state_flags": list(node.state_flags), "full_state": state,
        "unavailable": node.unavailable,
        "drained": any(flag.startswith("DRAIN") for flag in (node.state, *node.state_flags)),
        "down": node.state == "DOWN" or "NOT_RESPONDING" in node.state_flags,
        "reason": node.reason, "reason_set_by": node.reason_set_by, "reason_time": observe.iso(node.reason_time),
        "xids": gpu_xid.xids_in_text(node.reason), "gres": node.gres, "gres_used": node.gres_used,
        "cfg_tres": node.cfg_tres, "alloc_tres": node.alloc_tres, "gpus_configured": gpus_configured,
        "gpus_allocated": gpus_allocated or "0", "partitions": list(node.partitions), "role": "triaged",
    }
    text = f"Node {node.name} {state}" + (f": {node.reason}" if node.reason else "")
    if node.reason_set_by:
        text += f" (set by {node.reason_set_by} at {observe.iso(node.reason_time)})"
    if node.gres:
        text += f"; GRES {node.gres}, in use {node.gres_used or 'none'}"
    return Observation(source="slurm", kind="slurm_node", subject=f"node:{node.name}", text=text, command=command,
                       observed_at=now, fields=fields)


def _read_jobs(ctx: SlurmNodeContext, sink: Sink) -> None:
    """The jobs on the node now: who a drain would stop or wait for."""
    bounds = ctx.settings.bounds
    fetched, truncated = node_jobs.jobs_on_node(
        backend=ctx.backend, node=ctx.name, timeout_seconds=ctx.budget.call_timeout(),
        max_bytes=_NODE_OUTPUT_BYTES, max_items=bounds.max_items_per_list)
    now = utcnow()
    jobs = fetched.data
    for job in jobs[:MAX_JOBS_LISTED]:
        sink.observe(Observation(
            source="slurm", kind="node_workload", subject=f"slurm:{job.job_id}", command=fetched.command,
            observed_at=now,
            text=f"slurm job {job.job_id} ({job.name}, user {job.user}, partition {job.partition}) {job.state} on "
                 f"{ctx.name}" + (f", {job.nodes} node(s)" if job.nodes else "") + (f", GRES {job.gres}" if job.gres else ""),
            fields={"kind": "slurm-job", "name": job.job_id, "job_name": job.name, "user": job.user,
                    "state": job.state, "partition": job.partition, "nodes": job.nodes, "gres": job.gres,
                    "elapsed": job.elapsed, "node": ctx.name}))
    if truncated or len(jobs) > MAX_JOBS_LISTED:
        sink.truncate(f"jobs on the node: listed {min(len(jobs), MAX_JOBS_LISTED)}")
    multi_node = [job.job_id for job in jobs if (job.nodes or 1) > 1]
    sink.observe(Observation(
        source="slurm", kind="node_blast_radius", subject=f"node:{ctx.name}", command=fetched.command,
        observed_at=now,
        text=f"{ctx.name} runs {len(jobs)} Slurm job(s) now" + (f"; {len(multi_node)} span other nodes too"
                                                                  if multi_node else ""),
        fields={"node": ctx.name, "workloads": len(jobs), "jobs": [job.job_id for job in jobs[:MAX_JOBS_LISTED]],
                "multi_node_jobs": multi_node[:MAX_JOBS_LISTED], "truncated": truncated}))
    _fail_on(fetched, items=len(jobs), sink=sink)


def _read_dcgm(ctx: SlurmNodeContext, sink: Sink) -> None:
    node_series.read_node_series(name=ctx.name, settings=ctx.settings, budget=ctx.budget, sink=sink)


def plan(ctx: SlurmNodeContext) -> Sequence[Stage]:
    """Stage 1 the node; stage 2 its jobs and DCGM series."""

    def stage_node() -> list[Step]:
        return [Step(collector="slurm.node", run=functools.partial(_read_node, ctx))]

    def stage_around() -> list[Step]:
        if ctx.node is None:
            return []
        return [Step(collector="slurm.node_jobs", run=functools.partial(_read_jobs, ctx)),
                Step(collector="gpu.dcgm", run=functools.partial(_read_dcgm, ctx))]

    return (stage_node, stage_around)
