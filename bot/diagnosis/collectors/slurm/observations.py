"""Observations from one Slurm job's facts: job, pending reason, partition, nodes, steps, accounting."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.diagnosis.collectors.slurm.model import (
    Accounting,
    Fetched,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmStep,
)
from bot.diagnosis.knowledge import slurm_reasons
from bot.diagnosis.knowledge import xid as gpu_xid
from bot.evidence import findings

SOURCE = "slurm"

# Finished-job states, what they usually mean, and which layer the seeds' triage model puts them in.
_FINISHED = {
    "COMPLETED": ("completed", "workflow", "The job completed with exit code 0."),
    "FAILED": ("application_exit", "workflow", "The job's batch script or a step exited non-zero."),
    "OUT_OF_MEMORY": ("oom", "runtime", "A step was killed for exceeding its memory allocation."),
    "NODE_FAIL": ("node_failure", "runtime", "A node the job ran on failed."),
    "BOOT_FAIL": ("node_failure", "runtime", "A node failed to boot for the job."),
    "TIMEOUT": ("timeout", "workflow", "The job hit its time limit."),
    "DEADLINE": ("timeout", "workflow", "The job hit its deadline."),
    "CANCELLED": ("cancelled", "workflow", "The job was cancelled."),
    "PREEMPTED": ("preempted", "scheduler", "The job was preempted by a higher-priority job."),
}


def iso(value: datetime | None) -> str | None:
    """ISO-8601 UTC text, or None."""
    return findings._plain(value) if value else None


def job_not_found(*, job_id: str, fetched: Fetched[Any], now: datetime) -> findings.Observation:
    return findings.Observation(
        source=SOURCE,
        kind="slurm_job",
        subject=f"slurm:{job_id}",
        text=(
            f"Slurm does not know job {job_id}: it was never accepted (rejected at submission), or it "
            f"finished longer ago than MinJobAge and was purged. {fetched.excerpt}"
        ).strip(),
        command=fetched.command,
        observed_at=now,
        fields={
            "job_id": job_id,
            "job": job_id,
            "found": False,
            "state": "NOT_FOUND",
            "category": "not_found",
            "layer": "scheduler",
            "error": fetched.excerpt,
        },
    )


def job_observation(*, job: SlurmJob, fetched: Fetched[Any], now: datetime) -> findings.Observation:
    fields: dict[str, Any] = {
        "job_id": job.job_id,
        "job": job.job_id,
        "found": True,
        "name": job.name,
        "user": job.user,
        "state": job.state,
        "reason": job.reason_code,
        "reason_raw": job.reason_raw,
        "partition": job.partition,
        "qos": job.qos,
        "account": job.account,
        "nodes": list(job.nodes),
        "nodelist": job.nodelist,
        "req_nodes": list(job.req_nodes),
        "exc_nodes": list(job.exc_nodes),
        "dependency": job.dependency,
        "submit_time": iso(job.submit_time),
        "eligible_time": iso(job.eligible_time),
        "start_time": iso(job.start_time),
        "end_time": iso(job.end_time),
        "estimated_start": iso(job.start_time) if job.pending else None,
        "time_limit": job.time_limit,
        "num_nodes": job.num_nodes,
        "num_cpus": job.num_cpus,
        "tres_req": job.tres_req,
        "tres_alloc": job.tres_alloc,
        "gres_req": job.gres_req,
        "gres_alloc": list(job.gres_alloc),
        "exit_code": job.exit_code,
        "signal": job.exit_signal,
        "derived_exit_code": job.derived_exit_code,
        "batch_host": job.batch_host,
        "restarts": job.restarts,
        "stdout_path": job.std_out,
        "array_job_id": job.array_job_id,
        "array_task_id": job.array_task_id,
    }
    if job.pending:
        fields["category"] = slurm_reasons.classify_pending_reason(job.reason_code).category
        fields["layer"] = "scheduler"
    elif job.state in _FINISHED:
        category, layer, _ = _FINISHED[job.state]
        fields["category"], fields["layer"] = category, layer
    elif job.state == "RUNNING":
        fields["category"], fields["layer"] = "running", None
    text = _job_text(job)
    return findings.Observation(
        source=SOURCE,
        kind="slurm_job",
        subject=f"slurm:{job.job_id}",
        text=text,
        command=fetched.command,
        observed_at=now,
        fields=fields,
    )


def _job_text(job: SlurmJob) -> str:
    parts = [f"Job {job.job_id} ({job.name}) {job.state}"]
    if job.reason_raw and job.reason_raw != "None":
        parts.append(f"reason {job.reason_raw}")
    parts.append(f"partition {job.partition}")
    if job.nodelist:
        parts.append(f"on {job.nodelist}")
    if job.gres_req:
        parts.append(f"GRES requested {job.gres_req}")
    if job.gres_alloc:
        parts.append(f"GRES allocated {', '.join(job.gres_alloc)}")
    if job.tres_req:
        parts.append("TRES requested " + ",".join(f"{k}={v}" for k, v in job.tres_req.items()))
    if job.tres_alloc:
        parts.append("TRES allocated " + ",".join(f"{k}={v}" for k, v in job.tres_alloc.items()))
    if job.dependency:
        parts.append(f"dependency {job.dependency}")
    if job.pending and job.start_time:
        parts.append(f"estimated start {iso(job.start_time)}")
    if job.finished:
        parts.append(f"exit code {job.exit_code}:{job.exit_signal}")
        if job.state in _FINISHED:
            parts.append(_FINISHED[job.state][2])
    return "; ".join(parts)


def pending_observation(
    *,
    job: SlurmJob,
    partition: SlurmPartition | None,
    nodes: list[SlurmNode],
    now: datetime,
    partition_node_states: dict[str, int] | None = None,
) -> findings.Observation:
    reason = slurm_reasons.classify_pending_reason(job.reason_code)
    waited_for = [node for node in nodes if node.name in job.unavailable_nodes or node.name in job.req_nodes]
    node_reasons = {node.name: node.reason for node in waited_for if node.reason}
    node_states = {node.name: "+".join((node.state, *node.state_flags)) for node in waited_for}
    node_xids = {
        node.name: gpu_xid.xids_in_text(node.reason)
        for node in waited_for
        if gpu_xid.xids_in_text(node.reason)
    }
    fields: dict[str, Any] = {
        "job_id": job.job_id,
        "job": job.job_id,
        "reason": reason.code,
        "reason_raw": job.reason_raw,
        "category": reason.category,
        "meaning": reason.meaning,
        "unblock": reason.unblock.replace("<id>", job.job_id),
        "who": reason.who,
        "layer": "scheduler",
        "partition": job.partition,
        "partition_state": partition.state if partition else None,
        "unavailable_nodes": list(job.unavailable_nodes),
        "node_reasons": node_reasons,
        "node_states": node_states,
        "node_xids": node_xids,
        "dependency": job.dependency,
        "estimated_start": iso(job.start_time),
        "begin_time": iso(job.eligible_time) if reason.code == "BeginTime" else None,
    }
    if partition:
        fields["partition_node_states"] = partition_node_states or {}
        fields["partition_limits"] = _partition_limits(partition)
        fields["limit_violations"] = _limit_violations(job=job, partition=partition)
        if partition.name:
            fields["unblock"] = fields["unblock"].replace("<p>", partition.name)
    text = f"Job {job.job_id} is pending: {reason.code} ({reason.category}). {reason.meaning}"
    if node_reasons:
        text += " Nodes: " + "; ".join(
            f"{name} {node_states.get(name, '')}: {why}" for name, why in node_reasons.items()
        )
    text += f" Unblock: {fields['unblock']}"
    return findings.Observation(
        source=SOURCE,
        kind="slurm_pending_reason",
        subject=f"slurm:{job.job_id}",
        text=text,
        command=f"squeue -j {job.job_id} -o '%i %T %r'",
        observed_at=now,
        fields=fields,
    )


def _partition_limits(partition: SlurmPartition) -> dict[str, Any]:
    return {
        "max_nodes": partition.max_nodes,
        "min_nodes": partition.min_nodes,
        "max_time": partition.max_time,
        "max_time_minutes": partition.max_time_minutes,
        "total_nodes": partition.total_nodes,
        "total_cpus": partition.total_cpus,
        "allow_accounts": partition.allow_accounts,
        "allow_qos": partition.allow_qos,
        "qos": partition.qos,
        "max_cpus_per_node": partition.max_cpus_per_node,
        "max_mem_per_node": partition.max_mem_per_node,
    }


def _limit_violations(*, job: SlurmJob, partition: SlurmPartition) -> list[str]:
    """Which partition limits this job's request exceeds (expected vs observed, in words)."""
    found: list[str] = []
    if partition.max_nodes is not None and job.num_nodes is not None and job.num_nodes > partition.max_nodes:
        found.append(f"asks for {job.num_nodes} nodes; partition MaxNodes={partition.max_nodes}")
    if (
        partition.max_time_minutes is not None
        and job.time_limit_minutes is not None
        and job.time_limit_minutes > partition.max_time_minutes
    ):
        found.append(f"asks for TimeLimit={job.time_limit}; partition MaxTime={partition.max_time}")
    if partition.state and partition.state != "UP":
        found.append(f"partition State={partition.state}")
    return found


def partition_observation(
    *,
    partition: SlurmPartition,
    job: SlurmJob,
    fetched: Fetched[Any],
    now: datetime,
    node_states: dict[str, int],
) -> findings.Observation:
    limits = _partition_limits(partition)
    fields = {
        "partition": partition.name,
        "state": partition.state,
        "nodes": partition.nodes,
        **limits,
        "tres": partition.tres,
        "limit_violations": _limit_violations(job=job, partition=partition),
        "node_states": node_states,
    }
    # Worded without `State=`: node-failure rules match that form in node lines, and this is a partition.
    text = (
        f"Partition {partition.name} is {partition.state}; limits MaxNodes "
        f"{partition.max_nodes or 'UNLIMITED'}, MaxTime {partition.max_time}; nodes {partition.nodes}"
    )
    if node_states:
        text += " (" + ", ".join(f"{count} {state}" for state, count in sorted(node_states.items())) + ")"
    return findings.Observation(
        source=SOURCE,
        kind="slurm_partition",
        subject=f"partition:{partition.name}",
        text=text,
        command=fetched.command,
        observed_at=now,
        fields=fields,
    )


def node_observation(*, node: SlurmNode, job: SlurmJob, command: str, now: datetime) -> findings.Observation:
    role = (
        "allocated"
        if node.name in job.nodes
        else "waited_for"
        if node.name in job.unavailable_nodes
        else "requested"
    )
    xids = gpu_xid.xids_in_text(node.reason)
    state = "+".join((node.state, *node.state_flags))
    fields = {
        "node": node.name,
        "state": node.state,
        "state_flags": list(node.state_flags),
        "full_state": state,
        "unavailable": node.unavailable,
        "drained": any(flag.startswith("DRAIN") for flag in (node.state, *node.state_flags)),
        "down": node.state == "DOWN" or "NOT_RESPONDING" in node.state_flags,
        "reason": node.reason,
        "reason_set_by": node.reason_set_by,
        "reason_time": iso(node.reason_time),
        "xids": xids,
        "gres": node.gres,
        "gres_used": node.gres_used,
        "alloc_tres": node.alloc_tres,
        "cfg_tres": node.cfg_tres,
        "partitions": list(node.partitions),
        "role": role,
        "job_id": job.job_id,
    }
    text = (
        f"Node {node.name} {state}"
        + (f": {node.reason}" if node.reason else "")
        + (f" (GRES {node.gres})" if node.gres else "")
    )
    return findings.Observation(
        source=SOURCE,
        kind="slurm_node",
        subject=f"node:{node.name}",
        text=text,
        command=f"scontrol show node {node.name}",
        observed_at=now,
        fields=fields,
    )


def drain_reason_xids(*, node: SlurmNode, now: datetime) -> list[findings.Observation]:
    """A drain reason that names an Xid becomes a gpu_xid observation, with the table's meaning and action."""
    result = []
    for code in gpu_xid.xids_in_text(node.reason):
        info = gpu_xid.lookup(code)
        result.append(
            findings.Observation(
                source=SOURCE,
                kind="gpu_xid",
                subject=f"node:{node.name}",
                text=f"Node {node.name} drain reason names Xid {code} ({info.name}): {info.action}",
                command=f"scontrol show node {node.name}",
                observed_at=now,
                fields={
                    "node": node.name,
                    "xid": code,
                    "known": info.known,
                    "name": info.name,
                    "meaning": info.meaning,
                    "usual_cause": info.usual_cause,
                    "action": info.action,
                    "drain": info.drain,
                    "xid_source": info.source,
                    "evidence": "slurm_drain_reason",
                    "reason": node.reason,
                    "gpu_pci": None,
                    "layer": "runtime",
                },
            )
        )
    return result


def failing_step(steps: tuple[SlurmStep, ...]) -> SlurmStep | None:
    """The first failed step: numbered (srun) steps first, since the batch step fails when any of them does."""
    bad_states = {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "TIMEOUT", "CANCELLED", "BOOT_FAIL"}

    def failed(step: SlurmStep) -> bool:
        return step.state in bad_states or (step.exit_code or 0) != 0 or (step.exit_signal or 0) != 0

    numbered = [step for step in steps if step.step_id.rpartition(".")[2].isdigit() and "." in step.step_id]
    others = [step for step in steps if "." in step.step_id and step not in numbered]
    return next((step for step in (*numbered, *others) if failed(step)), None)


def step_observation(
    *, step: SlurmStep, job: SlurmJob, command: str, now: datetime, failing: bool
) -> findings.Observation:
    fields = {
        "job_id": job.job_id,
        "step_id": step.step_id,
        "name": step.name,
        "state": step.state,
        "exit_code": step.exit_code,
        "signal": step.exit_signal,
        "nodes": step.nodelist,
        "start": iso(step.start),
        "end": iso(step.end),
        "elapsed": step.elapsed,
        "max_rss": step.max_rss,
        "req_mem": step.req_mem,
        "oom": step.state == "OUT_OF_MEMORY",
        "node_fail": step.state == "NODE_FAIL",
        "failing": failing,
    }
    text = f"Step {step.step_id} ({step.name}) {step.state}"
    if step.exit_code is not None:
        text += f" exit {step.exit_code}:{step.exit_signal}"
    if step.nodelist:
        text += f" on {step.nodelist}"
    if failing:
        text += " <- first failing step"
    return findings.Observation(
        source=SOURCE,
        kind="slurm_step",
        subject=f"slurm:{step.step_id}",
        text=text,
        command=command,
        observed_at=now,
        fields=fields,
    )


def accounting_observation(
    *, accounting: Accounting, fetched: Fetched[Accounting], now: datetime
) -> findings.Observation:
    text = (
        "Accounting (sacct) is enabled."
        if accounting.enabled
        else f"Accounting is not enabled ({accounting.message or 'no answer'}): step exit codes and OOM/node-fail "
        "history come only from scontrol while the controller still holds the job."
    )
    return findings.Observation(
        source=SOURCE,
        kind="slurm_accounting",
        subject="slurm:accounting",
        text=text,
        command=fetched.command,
        observed_at=now,
        fields={"enabled": accounting.enabled, "message": accounting.message, "steps": len(accounting.steps)},
    )
