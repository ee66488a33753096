"""Slurm collector: one bounded look at a job, its partition and its nodes, as Observations.

Backends (`cli`: scontrol/sacct; `rest`: slurmrestd + JWT) share one interface (slurm_model.SlurmBackend).
Pending reasons carry `category` and `unblock` from bot.diagnosis.knowledge.slurm_reasons; node drain reasons carry Xid codes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bot.config import Settings, SnapshotBounds
from bot.diagnosis.collectors.slurm import observations as observe
from bot.diagnosis.collectors.slurm.cli import CliBackend
from bot.diagnosis.collectors.slurm.model import (
    Fetched,
    SlurmBackend,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
)
from bot.diagnosis.collectors.slurm.rest import RestBackend
from bot.evidence import findings

SOURCE = "slurm"
_MAX_OUTPUT_BYTES = 1_000_000


def make_backend(*, settings: Settings) -> SlurmBackend:
    """The backend the settings name; raises ValueError with what to set when it cannot be built."""
    kind = settings.slurm_backend.strip().lower()
    timeout = settings.bounds.call_timeout_seconds
    if kind == "cli":
        return CliBackend(timeout_seconds=timeout, max_bytes=_max_bytes(settings.bounds))
    if kind == "rest":
        if not settings.slurm_rest_url or not settings.slurm_rest_token:
            raise ValueError("TRIAGE_SLURM_BACKEND=rest needs TRIAGE_SLURMRESTD_URL and SLURM_JWT")
        return RestBackend(
            base_url=settings.slurm_rest_url,
            token=settings.slurm_rest_token,
            user=settings.slurm_rest_user,
            timeout_seconds=timeout,
            max_bytes=_max_bytes(settings.bounds) * 4,
        )
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
        name=name,
        outcome=outcome,
        elapsed_ms=int((time.monotonic() - started) * 1000),
        items=items,
        truncated=fetched.truncated,
        detail=fetched.error,
    )


def _skipped(name: str, detail: str) -> findings.CollectorReport:
    return findings.CollectorReport(
        name=name, outcome=findings.CollectorOutcome.SKIPPED, elapsed_ms=0, detail=detail
    )


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
    reports.append(
        _report(name="slurm.job", fetched=fetched_job, started=started, items=int(bool(fetched_job.data)))
    )
    job = fetched_job.data
    now = findings.utcnow()
    if job is None:
        if not fetched_job.error:
            observations.append(observe.job_not_found(job_id=job_id, fetched=fetched_job, now=now))
        return reports, observations, placement

    placement.update(_placement(job))
    observations.append(observe.job_observation(job=job, fetched=fetched_job, now=now))

    partition: SlurmPartition | None = None
    partition_states: dict[str, int] = {}
    if job.partition and not clock.expired():
        started = time.monotonic()
        # A job may name several partitions (`-p a,b`); the first is the one scontrol reports it in.
        fetched_partition = backend.partition(name=job.partition.split(",")[0])
        partition = fetched_partition.data
        reports.append(
            _report(
                name="slurm.partition", fetched=fetched_partition, started=started, items=int(bool(partition))
            )
        )
        if partition:
            partition_states = backend.partition_node_states(name=partition.name).data
            observations.append(
                observe.partition_observation(
                    partition=partition,
                    job=job,
                    fetched=fetched_partition,
                    now=now,
                    node_states=partition_states,
                )
            )
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
                name=report.name,
                outcome=findings.CollectorOutcome.PARTIAL,
                elapsed_ms=report.elapsed_ms,
                items=report.items,
                truncated=True,
                detail=f"looked at {len(capped)} of {len(node_names)} nodes (max_items_per_list)",
            )
        reports.append(report)
        for node in nodes:
            observations.append(
                observe.node_observation(node=node, job=job, command=fetched_nodes.command, now=now)
            )
            observations.extend(observe.drain_reason_xids(node=node, now=now))
    elif node_names:
        reports.append(_skipped("slurm.nodes", "snapshot deadline reached"))

    if job.pending:
        observations.append(
            observe.pending_observation(
                job=job, partition=partition, nodes=nodes, now=now, partition_node_states=partition_states
            )
        )

    if job.state == "RUNNING" and not clock.expired():
        started = time.monotonic()
        fetched_steps = backend.steps(job_id=job.job_id)
        reports.append(
            _report(name="slurm.steps", fetched=fetched_steps, started=started, items=len(fetched_steps.data))
        )
        for step in fetched_steps.data[: bounds.max_items_per_list]:
            observations.append(
                observe.step_observation(
                    step=step, job=job, command=fetched_steps.command, now=now, failing=False
                )
            )

    if (job.finished or job.state == "RUNNING") and not clock.expired():
        started = time.monotonic()
        fetched_accounting = backend.accounting(job_id=job.job_id)
        accounting = fetched_accounting.data
        observations.append(
            observe.accounting_observation(accounting=accounting, fetched=fetched_accounting, now=now)
        )
        if accounting.enabled:
            reports.append(
                _report(
                    name="slurm.accounting",
                    fetched=fetched_accounting,
                    started=started,
                    items=len(accounting.steps),
                )
            )
            failing = observe.failing_step(accounting.steps)
            for step in accounting.steps[: bounds.max_items_per_list]:
                observations.append(
                    observe.step_observation(
                        step=step,
                        job=job,
                        command=fetched_accounting.command,
                        now=now,
                        failing=step is failing,
                    )
                )
        else:
            reports.append(
                _skipped("slurm.accounting", f"accounting not enabled: {accounting.message}"[:300])
            )
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
    facts = {
        "slurm_partition": job.partition or "",
        "slurm_nodes": job.nodelist or "",
        "slurm_batch_host": job.batch_host or "",
        "slurm_gres_request": job.gres_req or "",
        "slurm_gres_allocated": ";".join(job.gres_alloc),
    }
    return {key: value for key, value in facts.items() if value}


def _involved_nodes(job: SlurmJob) -> list[str]:
    """Allocated nodes, then the nodes a pending job waits for or asked for; unique, in that order."""
    names: list[str] = []
    for name in (*job.nodes, *job.unavailable_nodes, *job.req_nodes):
        if name and name not in names:
            names.append(name)
    return names
