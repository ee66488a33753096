"""Prometheus metrics on a registry of our own (no process-global state), served at /metrics."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0)
SNAPSHOT_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0)


class _OpenIncidents(Collector):
    """Reads open incidents per severity from the database at scrape time."""

    def __init__(self, *, source: Callable[[], dict[str, int]]) -> None:
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "triage_open_incidents", "Open incidents by severity.", labels=["severity"]
        )
        try:
            counts = self._source()
        except Exception:  # noqa: BLE001 (a scrape must not fail because the database blinked)
            counts = {}
        for severity, count in sorted(counts.items()):
            family.add_metric([severity], count)
        yield family


class BotMetrics:
    """Commands by name and outcome, ack latency, snapshot duration and collector outcomes, scheduler
    job runs, open incidents by severity."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.commands = Counter(
            "triage_commands",
            "Slash subcommands handled, by name and outcome.",
            ["subcommand", "outcome"],
            registry=self.registry,
        )
        self.ack_latency = Histogram(
            "triage_ack_latency_seconds",
            "Time from request dispatch to ack (Slack allows 3 s).",
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.snapshot_duration = Histogram(
            "triage_snapshot_duration_seconds",
            "Wall time of one diagnostic snapshot, as its report states.",
            buckets=SNAPSHOT_BUCKETS,
            registry=self.registry,
        )
        self.collector_outcomes = Counter(
            "triage_collector_outcomes",
            "Collector runs inside snapshots, by collector name and outcome.",
            ["collector", "outcome"],
            registry=self.registry,
        )
        self.job_runs = Counter(
            "triage_scheduler_job_runs",
            "Durable scheduled jobs run, by kind and outcome.",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self._open_source: Callable[[], dict[str, int]] | None = None
        self._lock = threading.Lock()

    def watch_open_incidents(self, source: Callable[[], dict[str, int]]) -> None:
        """Register the open-incident gauge once a source (the incident service) exists."""
        with self._lock:
            if self._open_source is None:
                self._open_source = source
                self.registry.register(_OpenIncidents(source=source))

    def count(self, *, subcommand: str, outcome: str) -> None:
        """One handled subcommand."""
        self.commands.labels(subcommand=subcommand, outcome=outcome).inc()

    def observe_snapshot(self, report: Any) -> None:
        """Duration and per-collector outcomes of one SnapshotReport (observed at the edge, so `bot`
        stays free of prometheus)."""
        self.snapshot_duration.observe(max(0, int(report.elapsed_ms)) / 1000)
        for collector in report.collectors:
            outcome = getattr(collector.outcome, "value", collector.outcome)
            self.collector_outcomes.labels(collector=collector.name, outcome=str(outcome)).inc()

    def observing(self, diagnoser: Callable[..., Any]) -> Callable[..., Any]:
        """The same diagnoser, recording every report it returns (commands, buttons, revalidations)."""

        def observed(**kwargs: Any) -> Any:
            report = diagnoser(**kwargs)
            self.observe_snapshot(report)
            log.info(
                "snapshot taken",
                extra={
                    "elapsed_ms": report.elapsed_ms,
                    "findings": len(report.findings),
                    "verdict_layer": getattr(report.verdict.layer, "value", None),
                },
            )
            return report

        return observed

    def count_task(self, *, kind: str, outcome: str) -> None:
        """One scheduled job run (the TaskRunner's observer)."""
        self.job_runs.labels(kind=kind, outcome=outcome).inc()
