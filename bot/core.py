"""The core, assembled once from the settings: every service an edge (Slack, terminal) calls."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

from bot.changes.prevention import PreventionService
from bot.changes.service import ChangeService
from bot.clusters.registry import Clusters
from bot.config import Settings
from bot.evidence import findings
from bot.evidence.report import Diagnoser
from bot.incidents.policy import Policy
from bot.incidents.service import IncidentService
from bot.records.build import IncidentData
from bot.records.sources import ServiceDirectory, SnapshotRevalidator, load_incident_data, timeline_sink
from bot.schedule.store import Notifier, TaskRunner, TaskScheduler, TaskStore, default_instance_id
from bot.schedule.tasks import build_handlers
from storage.db import Engine

Clock = Callable[[], datetime]


@dataclasses.dataclass(kw_only=True)
class Core:
    """The incident lifecycle, the rulebook, changes, prevention and durable scheduled tasks over one database."""

    settings: Settings
    engine: Engine
    clock: Clock
    policy: Policy
    incidents: IncidentService
    changes: ChangeService
    prevention: PreventionService
    tasks: TaskStore
    runner: TaskRunner
    scheduler: TaskScheduler
    clusters: Clusters

    def incident_data(self, *, incident_key: str) -> IncidentData:
        """Everything the handoff and postmortem need about one incident."""
        return load_incident_data(
            engine=self.engine,
            incident_key=incident_key,
            changes=self.changes,
            prevention=self.prevention,
            tasks=self.tasks,
        )

    def close(self) -> None:
        """Stop the scheduler (if it runs) and release the database pool."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        self.engine.dispose()


def policy_from(settings: Settings) -> Policy:
    """The deployment's rulebook: its admins and its snapshot allow-list."""
    return Policy(admins=settings.admin_user_ids, snapshot_allowed=settings.snapshot_allowed_user_ids)


def build_core(
    *,
    settings: Settings,
    engine: Engine,
    diagnoser: Diagnoser | None,
    notifier: Notifier,
    clock: Clock = findings.utcnow,
    on_task_run: Callable[..., None] | None = None,
    clusters: Clusters | None = None,
) -> Core:
    """Wire the services over one engine; scheduled tasks post through `notifier` (Slack, or a printer).
    `clusters` is the process's registry (built from the settings when not given)."""
    policy = policy_from(settings)
    clusters = clusters or Clusters.from_settings(settings)
    incidents = IncidentService(engine=engine, diagnoser=diagnoser, clock=clock, policy=policy, clusters=clusters)
    sink = timeline_sink(clock=clock)
    changes = ChangeService(engine=engine, clock=clock, on_event=sink)
    prevention = PreventionService(engine=engine, clock=clock, on_event=sink)
    tasks = TaskStore(engine=engine, clock=clock)
    handlers = build_handlers(
        notifier=notifier,
        directory=ServiceDirectory(incidents=incidents),
        revalidator=SnapshotRevalidator(incidents=incidents, settings=settings),
        prevention=prevention,
        change_lookup=lambda change_id: changes.get(change_id=change_id),
        prune_requests=incidents.prune_processed_requests,
    )
    runner = TaskRunner(
        store=tasks,
        handlers=handlers,
        instance_id=settings.instance_id or default_instance_id(),
        on_run=on_task_run,
    )
    scheduler = TaskScheduler(runner=runner, poll_seconds=settings.scheduler_poll_seconds)
    return Core(
        settings=settings,
        engine=engine,
        clock=clock,
        policy=policy,
        incidents=incidents,
        changes=changes,
        prevention=prevention,
        tasks=tasks,
        runner=runner,
        scheduler=scheduler,
        clusters=clusters,
    )
