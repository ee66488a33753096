"""Slurm collector: one bounded look at a job, its partition and its nodes, as Observations.

Backends (`cli`: scontrol/sacct; `rest`: slurmrestd + JWT) share one interface (slurm_model.SlurmBackend).
Pending reasons carry `category` and `unblock` from bot.slurm_reasons; node drain reasons carry Xid codes.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bot import findings, gpu_xid, slurm_reasons
from bot.collectors.slurm_cli import CliBackend
from bot.collectors.slurm_model import (
    Accounting,
    Fetched,
    SlurmBackend,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmStep,
)
from bot.collectors.slurm_rest import RestBackend
from bot.config import Settings, SnapshotBounds

SOURCE = "slurm"
_MAX_OUTPUT_BYTES = 1_000_000

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


def make_backend(*, settings: Settings) -> SlurmBackend:
    """The backend the settings name; raises ValueError with what to set when it cannot be built."""
    kind = settings.slurm_backend.strip().lower()
    timeout = settings.bounds.call_timeout_seconds
    if kind == "cli":
        return CliBackend(timeout_seconds=timeout, max_bytes=_max_bytes(settings.bounds))
    if kind == "rest":
        if not settings.slurm_rest_url or not settings.slurm_rest_token:
            raise ValueError("TRIAGE_SLURM_BACKEND=rest needs TRIAGE_SLURMRESTD_URL and SLURM_JWT")
        return RestBackend(base_url=settings.slurm_rest_url, token=settings.slurm_rest_token,
                           user=settings.slurm_rest_user, timeout_seconds=timeout,
                           max_bytes=_max_bytes(settings.bounds) * 4)
    raise ValueError(f"Slurm backend `{kind}` is off or unknown: set TRIAGE_SLURM_BACKEND to cli or rest")


def _max_bytes(bounds: SnapshotBounds) -> int:
    return min(bounds.max_total_evidence_bytes * 4, _MAX_OUTPUT_BYTES)


class _Clock:
    """Tracks the snapshot deadline so later calls are skipped, not run late."""

    def __init__(self, *, bounds: SnapshotBounds) -> None:
        self._deadline = time.monotonic() + bounds.deadline_seconds

    def expired(self) -> bool:
        return time.monotonic() >= self._deadline


def _report(*, name: str, fetched: Fetched[Any], started: float, items: int) -> findings.CollectorReport:
    if fetched.timed_out:
        outcome = findings.CollectorOutcome.TIMEOUT
    elif fetched.error:
        outcome = findings.CollectorOutcome.PARTIAL if items else findings.CollectorOutcome.ERROR
    else:
        outcome = findings.CollectorOutcome.OK
    return findings.CollectorReport(
        name=name, outcome=outcome, elapsed_ms=int((time.monotonic() - started) * 1000), items=items,
        truncated=fetched.truncated, detail=fetched.error,
    )


def _skipped(name: str, detail: str) -> findings.CollectorReport:
    return findings.CollectorReport(name=name, outcome=findings.CollectorOutcome.SKIPPED, elapsed_ms=0,
                                    detail=detail)


def _iso(value: datetime | None) -> str | None:
    return findings._plain(value) if value else None


def collect_slurm_job(
    *, job_id: str, bounds: SnapshotBounds, backend: SlurmBackend
) -> tuple[list[findings.CollectorReport], list[findings.Observation], dict[str, str]]:
    """Read one job, its partition, its nodes and (finished jobs) its steps; return reports, facts, placement."""
    clock = _Clock(bounds=bounds)
    reports: list[findings.CollectorReport] = []
    observations: list[findings.Observation] = []
    placement: dict[str, str] = {"slurm_backend": backend.name}

    started = time.monotonic()
    version = backend.version()
    if version.data:
        placement["slurm_version"] = version.data

    started = time.monotonic()
    fetched_job = backend.job(job_id=job_id)
    reports.append(_report(name="slurm.job", fetched=fetched_job, started=started, items=int(bool(fetched_job.data))))
    job = fetched_job.data
    now = findings.utcnow()
    if job is None:
        if not fetched_job.error:
            observations.append(_job_not_found(job_id=job_id, fetched=fetched_job, now=now))
        return reports, observations, placement

    placement.update(_placement(job))
    observations.append(_job_observation(job=job, fetched=fetched_job, now=now))

    partition: SlurmPartition | None = None
    partition_states: dict[str, int] = {}
    if job.partition and not clock.expired():
        started = time.monotonic()
        # A job may name several partitions (`-p a,b`); the first is the one scontrol reports it in.
        fetched_partition = backend.partition(name=job.partition.split(",")[0])
        partition = fetched_partition.data
        reports.append(_report(name="slurm.partition", fetched=fetched_partition, started=started,
                               items=int(bool(partition))))
        if partition:
            partition_states = backend.partition_node_states(name=partition.name).data
            observations.append(_partition_observation(partition=partition, job=job, fetched=fetched_partition,
                                                       now=now, node_states=partition_states))
    elif job.partition:
        reports.append(_skipped("slurm.partition", "snapshot deadline reached"))

    node_names = _involved_nodes(job)
    nodes: list[SlurmNode] = []
    if node_names and not clock.expired():
        capped = node_names[: bounds.max_items_per_list]
        started = time.monotonic()
        fetched_nodes = backend.nodes(names=capped)
        nodes = fetched_nodes.data
        report = _report(name="slurm.nodes", fetched=fetched_nodes, started=started, items=len(nodes))
        if len(capped) < len(node_names):
            report = findings.CollectorReport(
                name=report.name, outcome=findings.CollectorOutcome.PARTIAL, elapsed_ms=report.elapsed_ms,
                items=report.items, truncated=True,
                detail=f"looked at {len(capped)} of {len(node_names)} nodes (max_items_per_list)",
            )
        reports.append(report)
        for node in nodes:
            observations.append(_node_observation(node=node, job=job, command=fetched_nodes.command, now=now))
            observations.extend(_drain_reason_xids(node=node, now=now))
    elif node_names:
        reports.append(_skipped("slurm.nodes", "snapshot deadline reached"))

    if job.pending:
        observations.append(_pending_observation(job=job, partition=partition, nodes=nodes, now=now,
                                                 partition_node_states=partition_states))

    if job.state == "RUNNING" and not clock.expired():
        started = time.monotonic()
        fetched_steps = backend.steps(job_id=job.job_id)
        reports.append(_report(name="slurm.steps", fetched=fetched_steps, started=started,
                               items=len(fetched_steps.data)))
        for step in fetched_steps.data[: bounds.max_items_per_list]:
            observations.append(_step_observation(step=step, job=job, command=fetched_steps.command, now=now,
                                                  failing=False))

    if (job.finished or job.state == "RUNNING") and not clock.expired():
        started = time.monotonic()
        fetched_accounting = backend.accounting(job_id=job.job_id)
        accounting = fetched_accounting.data
        observations.append(_accounting_observation(accounting=accounting, fetched=fetched_accounting, now=now))
        if accounting.enabled:
            reports.append(_report(name="slurm.accounting", fetched=fetched_accounting, started=started,
                                   items=len(accounting.steps)))
            failing = _failing_step(accounting.steps)
            for step in accounting.steps[: bounds.max_items_per_list]:
                observations.append(_step_observation(step=step, job=job, command=fetched_accounting.command,
                                                      now=now, failing=step is failing))
        else:
            reports.append(_skipped("slurm.accounting", f"accounting not enabled: {accounting.message}"[:300]))
    return reports, observations, placement


def read_job_output(*, path: str | None, job_id: str, max_bytes: int) -> tuple[str, str]:
    """The tail of a job's stdout file as this host sees it (shared FS on a login node), and a note.

    Returns (text, note): text is empty when the path is unset, unreadable or not a regular file.
    """
    if not path or path == "/dev/null":
        return "", "job output: no StdOut file"
    resolved = Path(path.replace("%j", job_id))
    try:
        if not resolved.is_file():
            return "", f"job output: {resolved} is not visible from this host"
        size = resolved.stat().st_size
        with resolved.open("rb") as handle:
            handle.seek(max(0, size - max_bytes))
            data = handle.read(max_bytes)
    except OSError as error:
        return "", f"job output: cannot read {resolved} ({error.strerror})"
    return data.decode("utf-8", "replace"), f"job output: last {len(data)} of {size} bytes of {resolved}"


def _placement(job: SlurmJob) -> dict[str, str]:
    facts = {"slurm_partition": job.partition or "", "slurm_nodes": job.nodelist or "",
             "slurm_batch_host": job.batch_host or "", "slurm_gres_request": job.gres_req or "",
             "slurm_gres_allocated": ";".join(job.gres_alloc)}
    return {key: value for key, value in facts.items() if value}


def _involved_nodes(job: SlurmJob) -> list[str]:
    """Allocated nodes, then the nodes a pending job waits for or asked for; unique, in that order."""
    names: list[str] = []
    for name in (*job.nodes, *job.unavailable_nodes, *job.req_nodes):
        if name and name not in names:
            names.append(name)
    return names


def _job_not_found(*, job_id: str, fetched: Fetched[Any], now: datetime) -> findings.Observation:
    return findings.Observation(
        source=SOURCE, kind="slurm_job", subject=f"slurm:{job_id}",
        text=(f"Slurm does not know job {job_id}: it was never accepted (rejected at submission), or it "
              f"finished longer ago than MinJobAge and was purged. {fetched.excerpt}").strip(),
        command=fetched.command, observed_at=now,
        fields={"job_id": job_id, "job": job_id, "found": False, "state": "NOT_FOUND", "category": "not_found",
                "layer": "scheduler", "error": fetched.excerpt},
    )


def _job_observation(*, job: SlurmJob, fetched: Fetched[Any], now: datetime) -> findings.Observation:
    fields: dict[str, Any] = {
        "job_id": job.job_id, "job": job.job_id, "found": True, "name": job.name, "user": job.user, "state": job.state,
        "reason": job.reason_code, "reason_raw": job.reason_raw, "partition": job.partition, "qos": job.qos,
        "account": job.account, "nodes": list(job.nodes), "nodelist": job.nodelist,
        "req_nodes": list(job.req_nodes), "exc_nodes": list(job.exc_nodes), "dependency": job.dependency,
        "submit_time": _iso(job.submit_time), "eligible_time": _iso(job.eligible_time),
        "start_time": _iso(job.start_time), "end_time": _iso(job.end_time),
        "estimated_start": _iso(job.start_time) if job.pending else None,
        "time_limit": job.time_limit, "num_nodes": job.num_nodes, "num_cpus": job.num_cpus,
        "tres_req": job.tres_req, "tres_alloc": job.tres_alloc, "gres_req": job.gres_req,
        "gres_alloc": list(job.gres_alloc), "exit_code": job.exit_code, "signal": job.exit_signal,
        "derived_exit_code": job.derived_exit_code, "batch_host": job.batch_host, "restarts": job.restarts,
        "stdout_path": job.std_out, "array_job_id": job.array_job_id, "array_task_id": job.array_task_id,
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
    return findings.Observation(source=SOURCE, kind="slurm_job", subject=f"slurm:{job.job_id}", text=text,
                                command=fetched.command, observed_at=now, fields=fields)


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
        parts.append(f"estimated start {_iso(job.start_time)}")
    if job.finished:
        parts.append(f"exit code {job.exit_code}:{job.exit_signal}")
        if job.state in _FINISHED:
            parts.append(_FINISHED[job.state][2])
    return "; ".join(parts)


def _pending_observation(*, job: SlurmJob, partition: SlurmPartition | None, nodes: list[SlurmNode],
                         now: datetime, partition_node_states: dict[str, int] | None = None) -> findings.Observation:
    reason = slurm_reasons.classify_pending_reason(job.reason_code)
    waited_for = [node for node in nodes if node.name in job.unavailable_nodes or node.name in job.req_nodes]
    node_reasons = {node.name: node.reason for node in waited_for if node.reason}
    node_states = {node.name: "+".join((node.state, *node.state_flags)) for node in waited_for}
    node_xids = {node.name: gpu_xid.xids_in_text(node.reason) for node in waited_for
                 if gpu_xid.xids_in_text(node.reason)}
    fields: dict[str, Any] = {
        "job_id": job.job_id, "job": job.job_id, "reason": reason.code, "reason_raw": job.reason_raw, "category": reason.category,
        "meaning": reason.meaning, "unblock": reason.unblock.replace("<id>", job.job_id), "who": reason.who,
        "layer": "scheduler", "partition": job.partition,
        "partition_state": partition.state if partition else None,
        "unavailable_nodes": list(job.unavailable_nodes), "node_reasons": node_reasons,
        "node_states": node_states, "node_xids": node_xids,
        "dependency": job.dependency, "estimated_start": _iso(job.start_time),
        "begin_time": _iso(job.eligible_time) if reason.code == "BeginTime" else None,
    }
    if partition:
        fields["partition_node_states"] = partition_node_states or {}
        fields["partition_limits"] = _partition_limits(partition)
        fields["limit_violations"] = _limit_violations(job=job, partition=partition)
        if partition.name:
            fields["unblock"] = fields["unblock"].replace("<p>", partition.name)
    text = f"Job {job.job_id} is pending: {reason.code} ({reason.category}). {reason.meaning}"
    if node_reasons:
        text += " Nodes: " + "; ".join(f"{name} {node_states.get(name, '')}: {why}"
                                       for name, why in node_reasons.items())
    text += f" Unblock: {fields['unblock']}"
    return findings.Observation(source=SOURCE, kind="slurm_pending_reason", subject=f"slurm:{job.job_id}",
                                text=text, command=f"squeue -j {job.job_id} -o '%i %T %r'", observed_at=now,
                                fields=fields)


def _partition_limits(partition: SlurmPartition) -> dict[str, Any]:
    return {"max_nodes": partition.max_nodes, "min_nodes": partition.min_nodes, "max_time": partition.max_time,
            "max_time_minutes": partition.max_time_minutes, "total_nodes": partition.total_nodes,
            "total_cpus": partition.total_cpus, "allow_accounts": partition.allow_accounts,
            "allow_qos": partition.allow_qos, "qos": partition.qos,
            "max_cpus_per_node": partition.max_cpus_per_node, "max_mem_per_node": partition.max_mem_per_node}


def _limit_violations(*, job: SlurmJob, partition: SlurmPartition) -> list[str]:
    """Which partition limits this job's request exceeds (expected vs observed, in words)."""
    found: list[str] = []
    if partition.max_nodes is not None and job.num_nodes is not None and job.num_nodes > partition.max_nodes:
        found.append(f"asks for {job.num_nodes} nodes; partition MaxNodes={partition.max_nodes}")
    if (partition.max_time_minutes is not None and job.time_limit_minutes is not None
            and job.time_limit_minutes > partition.max_time_minutes):
        found.append(f"asks for TimeLimit={job.time_limit}; partition MaxTime={partition.max_time}")
    if partition.state and partition.state != "UP":
        found.append(f"partition State={partition.state}")
    return found


def _partition_observation(*, partition: SlurmPartition, job: SlurmJob, fetched: Fetched[Any],
                           now: datetime, node_states: dict[str, int]) -> findings.Observation:
    limits = _partition_limits(partition)
    fields = {"partition": partition.name, "state": partition.state, "nodes": partition.nodes, **limits,
              "tres": partition.tres, "limit_violations": _limit_violations(job=job, partition=partition),
              "node_states": node_states}
    # Worded without `State=`: node-failure rules match that form in node lines, and this is a partition.
    text = (f"Partition {partition.name} is {partition.state}; limits MaxNodes "
            f"{partition.max_nodes or 'UNLIMITED'}, MaxTime {partition.max_time}; nodes {partition.nodes}")
    if node_states:
        text += " (" + ", ".join(f"{count} {state}" for state, count in sorted(node_states.items())) + ")"
    return findings.Observation(source=SOURCE, kind="slurm_partition", subject=f"partition:{partition.name}",
                                text=text, command=fetched.command, observed_at=now, fields=fields)


def _node_observation(*, node: SlurmNode, job: SlurmJob, command: str, now: datetime) -> findings.Observation:
    role = ("allocated" if node.name in job.nodes else "waited_for" if node.name in job.unavailable_nodes
            else "requested")
    xids = gpu_xid.xids_in_text(node.reason)
    state = "+".join((node.state, *node.state_flags))
    fields = {"node": node.name, "state": node.state, "state_flags": list(node.state_flags),
              "full_state": state, "unavailable": node.unavailable,
              "drained": any(flag.startswith("DRAIN") for flag in (node.state, *node.state_flags)),
              "down": node.state == "DOWN" or "NOT_RESPONDING" in node.state_flags,
              "reason": node.reason, "reason_set_by": node.reason_set_by, "reason_time": _iso(node.reason_time),
              "xids": xids, "gres": node.gres, "gres_used": node.gres_used, "alloc_tres": node.alloc_tres,
              "cfg_tres": node.cfg_tres, "partitions": list(node.partitions), "role": role, "job_id": job.job_id}
    text = f"Node {node.name} {state}" + (f": {node.reason}" if node.reason else "") + (
        f" (GRES {node.gres})" if node.gres else "")
    return findings.Observation(source=SOURCE, kind="slurm_node", subject=f"node:{node.name}", text=text,
                                command=f"scontrol show node {node.name}", observed_at=now, fields=fields)


def _drain_reason_xids(*, node: SlurmNode, now: datetime) -> list[findings.Observation]:
    """A drain reason that names an Xid becomes a gpu_xid observation, with the table's meaning and action."""
    result = []
    for code in gpu_xid.xids_in_text(node.reason):
        info = gpu_xid.lookup(code)
        result.append(findings.Observation(
            source=SOURCE, kind="gpu_xid", subject=f"node:{node.name}",
            text=f"Node {node.name} drain reason names Xid {code} ({info.name}): {info.action}",
            command=f"scontrol show node {node.name}", observed_at=now,
            fields={"node": node.name, "xid": code, "known": info.known, "name": info.name,
                    "meaning": info.meaning, "usual_cause": info.usual_cause, "action": info.action,
                    "drain": info.drain, "xid_source": info.source, "evidence": "slurm_drain_reason",
                    "reason": node.reason, "gpu_pci": None, "layer": "runtime"},
        ))
    return result


def _failing_step(steps: tuple[SlurmStep, ...]) -> SlurmStep | None:
    """The first failed step: numbered (srun) steps first, since the batch step fails when any of them does."""
    bad_states = {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "TIMEOUT", "CANCELLED", "BOOT_FAIL"}

    def failed(step: SlurmStep) -> bool:
        return step.state in bad_states or (step.exit_code or 0) != 0 or (step.exit_signal or 0) != 0

    numbered = [step for step in steps if step.step_id.rpartition(".")[2].isdigit() and "." in step.step_id]
    others = [step for step in steps if "." in step.step_id and step not in numbered]
    return next((step for step in (*numbered, *others) if failed(step)), None)


def _step_observation(*, step: SlurmStep, job: SlurmJob, command: str, now: datetime,
                      failing: bool) -> findings.Observation:
    fields = {"job_id": job.job_id, "step_id": step.step_id, "name": step.name, "state": step.state,
              "exit_code": step.exit_code, "signal": step.exit_signal, "nodes": step.nodelist,
              "start": _iso(step.start), "end": _iso(step.end), "elapsed": step.elapsed, "max_rss": step.max_rss,
              "req_mem": step.req_mem, "oom": step.state == "OUT_OF_MEMORY",
              "node_fail": step.state == "NODE_FAIL", "failing": failing}
    text = f"Step {step.step_id} ({step.name}) {step.state}"
    if step.exit_code is not None:
        text += f" exit {step.exit_code}:{step.exit_signal}"
    if step.nodelist:
        text += f" on {step.nodelist}"
    if failing:
        text += " <- first failing step"
    return findings.Observation(source=SOURCE, kind="slurm_step", subject=f"slurm:{step.step_id}", text=text,
                                command=command, observed_at=now, fields=fields)


def _accounting_observation(*, accounting: Accounting, fetched: Fetched[Accounting],
                            now: datetime) -> findings.Observation:
    text = ("Accounting (sacct) is enabled." if accounting.enabled else
            f"Accounting is not enabled ({accounting.message or 'no answer'}): step exit codes and OOM/node-fail "
            "history come only from scontrol while the controller still holds the job.")
    return findings.Observation(source=SOURCE, kind="slurm_accounting", subject="slurm:accounting", text=text,
                                command=fetched.command, observed_at=now,
                                fields={"enabled": accounting.enabled, "message": accounting.message,
                                        "steps": len(accounting.steps)})
