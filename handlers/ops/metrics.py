"""Prometheus metrics on a registry of our own (no process-global state), served at /metrics."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
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


# A snapshot's failure, by exception class name (the edge never imports the collectors to tell them apart).
_FAILURE_OUTCOMES = {"TargetNotFound": "not_found", "ClusterUnreachable": "unreachable",
                     "ClusterError": "bad_target", "UnknownCluster": "bad_target", "AmbiguousTarget": "bad_target",
                     "ClusterCredentialsMissing": "unavailable", "PermissionRefused": "refused"}


class _ClusterGauges(Collector):
    """Per cluster at scrape time: snapshots running and waiting for a slot, and whether it last answered."""

    def __init__(self, *, gates: Callable[[], list[tuple[str, int, int, int]]],
                 reachable: Callable[[], list[tuple[str, bool]]]) -> None:
        self._gates = gates
        self._reachable = reachable

    def collect(self) -> Iterator[GaugeMetricFamily]:
        running = GaugeMetricFamily("triage_cluster_snapshots_running", "Snapshots running now, per cluster.",
                                    labels=["cluster"])
        waiting = GaugeMetricFamily("triage_cluster_snapshots_waiting",
                                    "Snapshots waiting for one of the cluster's slots, per cluster.", labels=["cluster"])
        busy = CounterMetricFamily("triage_cluster_snapshots_busy",
                                   "Snapshots refused because every slot of the cluster was taken and its queue full.",
                                   labels=["cluster"])
        up = GaugeMetricFamily("triage_cluster_up", "1 when the cluster answered its last check (/readyz), else 0.",
                               labels=["cluster"])
        for name, now_running, now_waiting, refused in self._gates():
            running.add_metric([name], now_running)
            waiting.add_metric([name], now_waiting)
            busy.add_metric([name], refused)
        try:
            for name, answered in self._reachable():
                up.add_metric([name], 1 if answered else 0)
        except Exception:  # a scrape must not fail because a check did
            log.warning("cluster reachability unavailable for /metrics", exc_info=True)
        yield running
        yield waiting
        yield busy
        yield up


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
        self.cluster_snapshots = Counter(
            "triage_cluster_snapshots",
            "Snapshots per cluster, by outcome (ok, not_found, unreachable, bad_target, refused, error); "
            "snapshots refused as busy are triage_cluster_snapshots_busy_total.",
            ["cluster", "outcome"],
            registry=self.registry,
        )
        self.cluster_snapshot_duration = Histogram(
            "triage_cluster_snapshot_duration_seconds",
            "Wall time of one snapshot, per cluster.",
            ["cluster"],
            buckets=SNAPSHOT_BUCKETS,
            registry=self.registry,
        )
        self._open_source: Callable[[], dict[str, int]] | None = None
        self._clusters_watched = False
        self._lock = threading.Lock()

    def watch_open_incidents(self, source: Callable[[], dict[str, int]]) -> None:
        """Register the open-incident gauge once a source (the incident service) exists."""
        with self._lock:
            if self._open_source is None:
                self._open_source = source
                self.registry.register(_OpenIncidents(source=source))

    def watch_clusters(self, *, gates: Callable[[], list[tuple[str, int, int, int]]],
                       reachable: Callable[[], list[tuple[str, bool]]]) -> None:
        """Register the per-cluster gauges once: (name, running, waiting, refused) and (name, answered), read
        at scrape time."""
        with self._lock:
            if not self._clusters_watched:
                self._clusters_watched = True
                self.registry.register(_ClusterGauges(gates=gates, reachable=reachable))

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

    def observing(self, diagnoser: Callable[..., Any], *,
                  cluster_of: Callable[[Any], str] | None = None) -> Callable[..., Any]:
        """The same diagnoser, recording every report it returns (commands, buttons, revalidations), and per
        cluster every outcome, failures included (`cluster_of(target)` names the cluster of a failed one)."""

        def failed_on(target: Any) -> str:
            try:
                return cluster_of(target) if cluster_of is not None else ""
            except Exception:  # noqa: BLE001 (the id named no cluster: counted, not raised here)
                return "unknown"

        def observed(**kwargs: Any) -> Any:
            try:
                report = diagnoser(**kwargs)
            except Exception as error:
                outcome = _FAILURE_OUTCOMES.get(type(error).__name__, "error")
                self.cluster_snapshots.labels(cluster=failed_on(kwargs.get("target")) or "unknown",
                                              outcome=outcome).inc()
                raise
            self.observe_snapshot(report)
            cluster = getattr(report, "cluster", "") or failed_on(kwargs.get("target")) or "unknown"
            self.cluster_snapshots.labels(cluster=cluster, outcome="ok").inc()
            self.cluster_snapshot_duration.labels(cluster=cluster).observe(max(0, int(report.elapsed_ms)) / 1000)
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
