"""Slurm collector pieces: the backend the settings name, the job's placement facts and nodes, its output.

Backends (`cli`: scontrol/sacct; `rest`: slurmrestd + JWT) share one interface (model.SlurmBackend). The steps
that read a job under the snapshot engine are in plan.py; pending reasons carry `category` and `unblock` from
bot.diagnosis.knowledge.slurm_reasons; node drain reasons carry Xid codes.
"""

from __future__ import annotations

from bot.config import Settings, SnapshotBounds
from bot.diagnosis.collectors.slurm.cli import CliBackend
from bot.diagnosis.collectors.slurm.model import SlurmBackend, SlurmJob
from bot.diagnosis.collectors.slurm.rest import RestBackend
from bot.evidence import findings

SOURCE = "slurm"
_MAX_OUTPUT_BYTES = 1_000_000


def make_backend(*, settings: Settings) -> SlurmBackend:
    """The backend the settings name; raises ValueError with what to set when it cannot be built."""
    kind = settings.slurm_backend.strip().lower()
    timeout = settings.bounds.call_timeout_seconds
    if kind == "cli":
        return CliBackend(timeout_seconds=timeout, max_bytes=_max_bytes(settings.bounds),
                          cluster=settings.slurm_cluster)
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


def collect_slurm_job(
    *, job_id: str, bounds: SnapshotBounds, backend: SlurmBackend, settings: Settings | None = None
) -> tuple[list[findings.CollectorReport], list[findings.Observation], dict[str, str]]:
    """One job's Slurm evidence under the snapshot engine: (collector reports, observations, placement facts)."""
    from bot.diagnosis import engine
    from bot.diagnosis.collectors.slurm.plan import SlurmContext, plan

    chosen = (settings or Settings()).model_copy(update={"bounds": bounds})
    budget = engine.Budget(bounds=bounds)
    ctx = SlurmContext(job_id=job_id, backend=backend, settings=chosen, budget=budget)
    result = engine.run_snapshot(stages=plan(ctx), budget=budget)
    return list(result.reports), list(result.observations), dict(ctx.placement)


def job_placement(job: SlurmJob) -> dict[str, str]:
    """The handoff's placement facts from the job record."""
    facts = {
        "slurm_partition": job.partition or "",
        "slurm_nodes": job.nodelist or "",
        "slurm_batch_host": job.batch_host or "",
        "slurm_gres_request": job.gres_req or "",
        "slurm_gres_allocated": ";".join(job.gres_alloc),
    }
    return {key: value for key, value in facts.items() if value}


def involved_nodes(job: SlurmJob) -> list[str]:
    """Allocated nodes, then the nodes a pending job waits for or asked for; unique, in that order."""
    names: list[str] = []
    for name in (*job.nodes, *job.unavailable_nodes, *job.req_nodes):
        if name and name not in names:
            names.append(name)
    return names
