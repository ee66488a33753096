"""One node's DCGM exporter series (Xid, ECC, row remapping, NVLink errors) as a snapshot step, for both node plans."""

from __future__ import annotations

from bot.config import Settings
from bot.diagnosis.collectors.gpu import dcgm_metrics
from bot.diagnosis.engine import Budget, CollectorFailure, Sink
from bot.evidence.findings import CollectorOutcome, utcnow


def read_node_series(*, name: str, settings: Settings, budget: Budget, sink: Sink) -> None:
    """Read the node's series when Prometheus is configured; otherwise skip, saying what to set."""
    if not settings.prometheus_url:
        sink.mark(CollectorOutcome.SKIPPED, "TRIAGE_PROMETHEUS_URL not set: no DCGM Xid/ECC/NVLink series read")
        return
    try:
        samples = dcgm_metrics.query_node_series(prometheus_url=settings.prometheus_url, nodes=[name],
                                                 timeout_seconds=budget.call_timeout(),
                                                 series=tuple(dcgm_metrics.NODE_SERIES))
    except dcgm_metrics.MetricsUnavailable as error:
        raise CollectorFailure(outcome=CollectorOutcome.ERROR, detail=str(error)) from None
    for item in dcgm_metrics.dcgm_observations(samples=samples, observed_at=utcnow(),
                                               prometheus_url=settings.prometheus_url):
        sink.observe(item)
    sink.count(len(samples))
