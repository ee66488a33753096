"""`/triage job slurm:<id>`: one bounded Slurm snapshot, classified, as the shared SnapshotReport."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from bot.collectors import slurm
from bot.collectors.slurm_model import SlurmBackend
from bot.config import Settings
from bot.findings import CollectorOutcome, CollectorReport, Observation, Verdict, utcnow
from bot.report import Diagnosis, SnapshotReport
from bot.targets import Platform, Target, parse_target

Classifier = Callable[[Sequence[Observation]], Diagnosis]


def _default_classifier(observations: Sequence[Observation]) -> Diagnosis:
    """bot.classify when this build has it; otherwise say plainly that no verdict was drawn."""
    try:
        from bot.classify import diagnose_observations
    except ImportError:
        return Diagnosis(verdict=Verdict(
            layer=None, confidence=0.0,
            summary=f"Classifier not available in this build; {len(observations)} Slurm observations "
                    "collected, no verdict drawn."), findings=())
    return diagnose_observations(observations)


def diagnose_slurm(
    *,
    target: Target | str,
    settings: Settings,
    backend: SlurmBackend | None = None,
    classify: Classifier | None = None,
) -> SnapshotReport:
    """Snapshot one Slurm job inside settings.bounds and classify it; raises ValueError on a bad target."""
    parsed = parse_target(target) if isinstance(target, str) else target
    if parsed.platform is not Platform.SLURM:
        raise ValueError(f"`{parsed.key}` is not a Slurm job id; Kubernetes targets go to bot.diagnose")
    taken_at = utcnow()
    started = time.monotonic()
    try:
        chosen = backend or slurm.make_backend(settings=settings)
    except ValueError as error:
        report = CollectorReport(name="slurm", outcome=CollectorOutcome.SKIPPED, elapsed_ms=0, detail=str(error))
        return SnapshotReport(target=parsed.key, target_kind="slurm", taken_at=taken_at, elapsed_ms=0,
                              verdict=Verdict(layer=None, confidence=0.0, summary=str(error)), findings=(),
                              collectors=(report,), not_checked=(f"slurm: {error}",))
    reports, observations, placement = slurm.collect_slurm_job(job_id=parsed.name, bounds=settings.bounds,
                                                               backend=chosen)
    diagnosis = (classify or _default_classifier)(observations)
    not_checked = tuple(
        f"{report.name}: {report.outcome.value}" + (f" ({report.detail})" if report.detail else "")
        for report in reports if report.outcome is not CollectorOutcome.OK
    )
    return SnapshotReport(
        target=parsed.key, target_kind="slurm", taken_at=taken_at,
        elapsed_ms=int((time.monotonic() - started) * 1000), verdict=diagnosis.verdict,
        findings=diagnosis.findings, collectors=tuple(reports), observations=tuple(observations),
        placement=placement, not_checked=not_checked, unexplained=diagnosis.unexplained,
    )
