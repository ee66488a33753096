"""`/triage job slurm:<id>`: one bounded Slurm snapshot, classified, as the shared SnapshotReport.

Besides scontrol/slurmrestd facts it reads the job's own output (CLI backend, shared FS) for NCCL fabric
errors, and, only when asked and an operator configured a runner, probes the job's nodes' GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from bot.config import Settings
from bot.diagnosis.collectors import node_probe
from bot.diagnosis.collectors.fabric import nccl as fabric
from bot.diagnosis.collectors.gpu import dcgm_metrics
from bot.diagnosis.collectors.gpu import nvidia_smi as gpu
from bot.diagnosis.collectors.slurm import collector as slurm
from bot.diagnosis.collectors.slurm.model import SlurmBackend
from bot.evidence.findings import CollectorOutcome, CollectorReport, Observation, Verdict, utcnow
from bot.evidence.report import Diagnosis, SnapshotReport
from bot.evidence.targets import Platform, Target, parse_target

Classifier = Callable[[Sequence[Observation]], Diagnosis]
MAX_PROBED_NODES = 4
PROBE_CAP_SECONDS = 60.0
TAIL_LINES_KEPT = 40


def _default_classifier(observations: Sequence[Observation]) -> Diagnosis:
    """bot.diagnosis.classify when this build has it; otherwise say plainly that no verdict was drawn."""
    try:
        from bot.diagnosis.classify import diagnose_observations
    except ImportError:
        return Diagnosis(
            verdict=Verdict(
                layer=None,
                confidence=0.0,
                summary=f"Classifier not available in this build; {len(observations)} Slurm observations "
                "collected, no verdict drawn.",
            ),
            findings=(),
        )
    return diagnose_observations(observations)


def _job_output(*, job: Observation, settings: Settings) -> tuple[list[Observation], CollectorReport]:
    """The job's stdout tail as a log_tail observation plus any NCCL fabric errors in it."""
    started = time.monotonic()
    text, note = slurm.read_job_output(
        path=job.fields.get("stdout_path"),
        job_id=str(job.fields["job_id"]),
        max_bytes=settings.bounds.max_log_bytes_per_container,
    )
    if not text:
        return [], CollectorReport(
            name="slurm.output", outcome=CollectorOutcome.SKIPPED, elapsed_ms=0, detail=note
        )
    now = utcnow()
    host = job.fields.get("batch_host") or "batch-host"
    lines = text.splitlines()
    found = fabric.fabric_observations(
        logs={host: text}, observed_at=now, subject=job.subject, max_events=settings.bounds.max_items_per_list
    )
    tail = Observation(
        source="slurm",
        kind="log_tail",
        subject=job.subject,
        text="\n".join(lines[-TAIL_LINES_KEPT:]),
        command=f"tail -n {TAIL_LINES_KEPT} {job.fields.get('stdout_path')}",
        observed_at=now,
        fields={"lines": len(lines), "bytes": len(text.encode()), "node": host, "note": note},
    )
    report = CollectorReport(
        name="slurm.output",
        outcome=CollectorOutcome.OK,
        elapsed_ms=int((time.monotonic() - started) * 1000),
        items=len(found) + 1,
        detail=note,
    )
    return [tail, *found], report


def _gpu_probe(*, job: Observation, settings: Settings) -> tuple[list[Observation], list[CollectorReport]]:
    """nvidia-smi -q -x on the job's first nodes through the configured runner (inside the job when running)."""
    try:
        runner = node_probe.make_runner(setting=settings.node_probe_runner, image=settings.node_probe_image)
    except ValueError as error:
        return [], [
            CollectorReport(
                name="gpu.probe", outcome=CollectorOutcome.SKIPPED, elapsed_ms=0, detail=str(error)
            )
        ]
    if isinstance(runner, node_probe.SrunRunner) and job.fields.get("state") == "RUNNING":
        runner = node_probe.SrunRunner(job_id=str(job.fields["job_id"]))
    observations: list[Observation] = []
    reports: list[CollectorReport] = []
    for node in list(job.fields.get("nodes") or [])[:MAX_PROBED_NODES]:
        started = time.monotonic()
        try:
            result = node_probe.run_on_node(
                runner=runner,
                node=node,
                command=["nvidia-smi", "-q", "-x"],
                allow=True,
                time_cap_seconds=PROBE_CAP_SECONDS,
            )
        except node_probe.ProbeNotAllowed as refused:
            reports.append(
                CollectorReport(
                    name=f"gpu.probe.{node}",
                    outcome=CollectorOutcome.SKIPPED,
                    elapsed_ms=0,
                    detail=str(refused),
                )
            )
            break
        elapsed = int((time.monotonic() - started) * 1000)
        if not result.ok:
            outcome = CollectorOutcome.TIMEOUT if result.timed_out else CollectorOutcome.ERROR
            reports.append(
                CollectorReport(
                    name=f"gpu.probe.{node}",
                    outcome=outcome,
                    elapsed_ms=elapsed,
                    detail=f"`{result.shown}`: {result.stderr.strip()[:200]}",
                )
            )
            continue
        try:
            smi = gpu.parse_nvidia_smi_xml(result.stdout)
        except gpu.GpuParseError as error:
            reports.append(
                CollectorReport(
                    name=f"gpu.probe.{node}",
                    outcome=CollectorOutcome.ERROR,
                    elapsed_ms=elapsed,
                    detail=str(error),
                )
            )
            continue
        observations.extend(gpu.gpu_observations(node=node, observed_at=utcnow(), smi=smi))
        reports.append(
            CollectorReport(
                name=f"gpu.probe.{node}", outcome=CollectorOutcome.OK, elapsed_ms=elapsed, items=len(smi.gpus)
            )
        )
    return observations, reports


def _dcgm(
    *, observations: list[Observation], settings: Settings
) -> tuple[list[Observation], CollectorReport]:
    """DCGM exporter series for the job's nodes (allocated and waited-for), when Prometheus is configured."""
    nodes = list(
        dict.fromkeys(str(item.fields["node"]) for item in observations if item.kind == "slurm_node")
    )
    nodes = nodes[: settings.bounds.max_items_per_list]
    if not settings.prometheus_url or not nodes:
        detail = "TRIAGE_PROMETHEUS_URL not set" if not settings.prometheus_url else "no nodes to look up"
        return [], CollectorReport(
            name="gpu.dcgm", outcome=CollectorOutcome.SKIPPED, elapsed_ms=0, detail=detail
        )
    started = time.monotonic()
    try:
        samples = dcgm_metrics.query_node_series(
            prometheus_url=settings.prometheus_url,
            nodes=nodes,
            timeout_seconds=settings.bounds.call_timeout_seconds,
        )
    except dcgm_metrics.MetricsUnavailable as error:
        return [], CollectorReport(
            name="gpu.dcgm",
            outcome=CollectorOutcome.ERROR,
            elapsed_ms=int((time.monotonic() - started) * 1000),
            detail=str(error),
        )
    found = dcgm_metrics.dcgm_observations(
        samples=samples, observed_at=utcnow(), prometheus_url=settings.prometheus_url
    )
    return found, CollectorReport(
        name="gpu.dcgm",
        outcome=CollectorOutcome.OK,
        elapsed_ms=int((time.monotonic() - started) * 1000),
        items=len(samples),
    )


def diagnose_slurm(
    *,
    target: Target | str,
    settings: Settings,
    backend: SlurmBackend | None = None,
    classify: Classifier | None = None,
    probe_gpus: bool = False,
) -> SnapshotReport:
    """Snapshot one Slurm job inside settings.bounds and classify it; raises ValueError on a bad target."""
    parsed = parse_target(target) if isinstance(target, str) else target
    if parsed.platform is not Platform.SLURM:
        raise ValueError(f"`{parsed.key}` is not a Slurm job id; Kubernetes targets go to bot.diagnosis.service")
    taken_at = utcnow()
    started = time.monotonic()
    try:
        chosen = backend or slurm.make_backend(settings=settings)
    except ValueError as error:
        report = CollectorReport(
            name="slurm", outcome=CollectorOutcome.SKIPPED, elapsed_ms=0, detail=str(error)
        )
        return SnapshotReport(
            target=parsed.key,
            target_kind="slurm",
            taken_at=taken_at,
            elapsed_ms=0,
            verdict=Verdict(layer=None, confidence=0.0, summary=str(error)),
            findings=(),
            collectors=(report,),
            not_checked=(f"slurm: {error}",),
        )
    reports, observations, placement = slurm.collect_slurm_job(
        job_id=parsed.name, bounds=settings.bounds, backend=chosen
    )
    job = next((item for item in observations if item.kind == "slurm_job" and item.fields.get("found")), None)
    if job is not None and chosen.name == "cli":
        extra, report = _job_output(job=job, settings=settings)
        observations.extend(extra)
        reports.append(report)
    if job is not None:
        extra_dcgm, dcgm_report = _dcgm(observations=observations, settings=settings)
        observations.extend(extra_dcgm)
        reports.append(dcgm_report)
    if job is not None and probe_gpus:
        extra_gpu, gpu_reports = _gpu_probe(job=job, settings=settings)
        observations.extend(extra_gpu)
        reports.extend(gpu_reports)
    diagnosis = (classify or _default_classifier)(observations)
    missing = next(
        (item for item in observations if item.kind == "slurm_job" and item.fields.get("found") is False),
        None,
    )
    if missing is not None:
        diagnosis = Diagnosis(
            verdict=Verdict(layer=None, confidence=0.0, summary=missing.text),
            findings=diagnosis.findings,
            unexplained=diagnosis.unexplained,
        )
    not_checked = tuple(
        f"{report.name}: {report.outcome.value}" + (f" ({report.detail})" if report.detail else "")
        for report in reports
        if report.outcome is not CollectorOutcome.OK
    )
    return SnapshotReport(
        target=parsed.key,
        target_kind="slurm",
        taken_at=taken_at,
        elapsed_ms=int((time.monotonic() - started) * 1000),
        verdict=diagnosis.verdict,
        findings=diagnosis.findings,
        collectors=tuple(reports),
        observations=tuple(observations),
        placement=placement,
        not_checked=not_checked,
        unexplained=diagnosis.unexplained,
    )
