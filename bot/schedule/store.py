"""Durable scheduled jobs: rows in the database, claimed atomically so each runs once across replicas.

APScheduler only drives the polling loop; the jobs themselves live in `scheduled_job`, so they survive a
restart and any number of replicas can share them. A claim is a conditional UPDATE
(`... WHERE id = :id AND claimed_by IS NULL`): the database lets exactly one replica win. On PostgreSQL
candidates are picked with `FOR UPDATE SKIP LOCKED` so replicas do not queue behind each other (the
statements live in storage/repositories/tasks.py). A replica that dies mid-job leaves a stale claim; after `lease` the job is released and runs again
(at-least-once only in that crash case).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog
from apscheduler.schedulers.background import BackgroundScheduler  # type: ignore[import-untyped]

from bot.evidence.findings import utcnow
from storage.db import Engine, Session, session_scope
from storage.repositories import tasks as task_repo
from storage.tables import records as tables

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Button:
    """A plain description of one action a message offers; the edge renders it (Slack: a button)."""

    label: str
    action_id: str
    value: str


class Notifier(Protocol):
    """Where jobs post; handlers implement it with Slack's WebClient, the demo with a printer."""

    def post_thread(
        self, *, channel: str, thread_ts: str, text: str, buttons: tuple[Button, ...] = ()
    ) -> None:
        """Reply in an incident's thread."""

    def post_direct(self, *, user: str, text: str) -> None:
        """Send a direct message to one person."""

    def post_channel(self, *, channel: str, text: str) -> None:
        """Post a top-level message in a channel."""

    def upload_file(
        self, *, channel: str, thread_ts: str, filename: str, content: bytes, title: str, comment: str = ""
    ) -> None:
        """Attach a file (Markdown, PNG) to an incident's thread."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskView:
    """One claimed job as plain data, handed to its handler."""

    id: int
    kind: str
    incident_key: str | None
    payload: dict[str, Any]
    due_at: datetime
    attempts: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskContext:
    """What a handler gets: the job, the store (to schedule follow-ups) and the time."""

    job: TaskView
    store: TaskStore
    now: datetime


TaskHandler = Callable[[TaskContext], "dict[str, Any] | None"]


def default_instance_id() -> str:
    """Unique per process, readable in the table: host plus a random suffix."""
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


class TaskStore:
    """Adds, claims and finishes durable jobs."""

    def __init__(self, *, engine: Engine, clock: Clock = utcnow) -> None:
        """Bind to one database."""
        self._engine = engine
        self._clock = clock

    @property
    def clock(self) -> Clock:
        """The store's notion of now."""
        return self._clock

    def enqueue(
        self,
        *,
        kind: str,
        due_at: datetime,
        incident_key: str | None = None,
        payload: Mapping[str, Any] | None = None,
        dedupe_key: str | None = None,
    ) -> int | None:
        """Add a job; with a `dedupe_key` already present, add nothing and return None."""
        with session_scope(self._engine) as session:
            return self.enqueue_in(
                session=session,
                kind=kind,
                due_at=due_at,
                incident_key=incident_key,
                payload=payload,
                dedupe_key=dedupe_key,
            )

    def enqueue_in(
        self,
        *,
        session: Session,
        kind: str,
        due_at: datetime,
        incident_key: str | None = None,
        payload: Mapping[str, Any] | None = None,
        dedupe_key: str | None = None,
    ) -> int | None:
        """Add a job inside the caller's transaction (so it commits with the change that caused it)."""
        if dedupe_key is not None and task_repo.has_dedupe_key(session, dedupe_key=dedupe_key):
            return None
        row = tables.ScheduledTask(
            kind=kind,
            incident_key=incident_key,
            payload=dict(payload or {}),
            dedupe_key=dedupe_key,
            due_at=due_at,
            created_at=self._clock(),
        )
        return task_repo.add(session, task=row)

    def claim_due(self, *, instance_id: str, limit: int = 20) -> tuple[TaskView, ...]:
        """Claim up to `limit` due jobs for this instance; each claim is an atomic conditional UPDATE."""
        now = self._clock()
        with session_scope(self._engine) as session:
            rows = task_repo.claim_due(session, instance_id=instance_id, now=now, limit=limit)
        return tuple(
            TaskView(
                id=row["id"],
                kind=row["kind"],
                incident_key=row["incident_key"],
                payload=dict(row["payload"] or {}),
                due_at=row["due_at"],
                attempts=row["attempts"],
            )
            for row in rows
        )

    def finish(self, *, job_id: int, instance_id: str, result: Mapping[str, Any] | None = None) -> None:
        """Mark a job this instance claimed as done, keeping what it found."""
        with session_scope(self._engine) as session:
            task_repo.finish(
                session, task_id=job_id, instance_id=instance_id, now=self._clock(), result=result
            )

    def fail(self, *, job_id: int, instance_id: str, error: str, retry_at: datetime | None) -> None:
        """Release a failed job for a later retry, or close it for good when `retry_at` is None."""
        with session_scope(self._engine) as session:
            if retry_at is None:
                task_repo.close_failed(
                    session, task_id=job_id, instance_id=instance_id, error=error[:2000], now=self._clock()
                )
            else:
                task_repo.release_for_retry(
                    session, task_id=job_id, instance_id=instance_id, error=error[:2000], retry_at=retry_at
                )

    def release_stale(self, *, lease: timedelta) -> int:
        """Free claims older than `lease` whose replica never finished them (it died); returns how many."""
        cutoff = self._clock() - lease
        with session_scope(self._engine) as session:
            return task_repo.release_stale(session, cutoff=cutoff)

    def has_pending(self, *, kind: str, incident_key: str) -> bool:
        """Whether a job of this kind waits (unclaimed, not done) for this incident."""
        with session_scope(self._engine) as session:
            return task_repo.has_pending(session, kind=kind, incident_key=incident_key)

    def postpone(self, *, kind: str, incident_key: str, until: datetime) -> int:
        """Push pending jobs of one kind for one incident to `until` (snooze); returns how many moved."""
        with session_scope(self._engine) as session:
            return task_repo.postpone(session, kind=kind, incident_key=incident_key, until=until)

    def cancel(self, *, kind: str, incident_key: str, dedupe_prefix: str | None = None) -> int:
        """Close pending jobs of one kind for one incident (reminders once it is resolved, windows of a
        rolled-back change when `dedupe_prefix` narrows it)."""
        with session_scope(self._engine) as session:
            return task_repo.cancel(
                session, kind=kind, incident_key=incident_key, now=self._clock(), dedupe_prefix=dedupe_prefix
            )

    def tasks(
        self, *, incident_key: str | None = None, kind: str | None = None
    ) -> tuple[tables.ScheduledTask, ...]:
        """Every job (done or not), for records and tests."""
        with session_scope(self._engine) as session:
            return tuple(task_repo.listing(session, incident_key=incident_key, kind=kind))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What one poll did."""

    ran: int
    failed: int


class TaskRunner:
    """Claims due jobs and runs each through its kind's handler; one bad job never stops the rest."""

    def __init__(
        self,
        *,
        store: TaskStore,
        handlers: Mapping[str, TaskHandler],
        instance_id: str,
        batch: int = 20,
        max_attempts: int = 5,
        retry_after: timedelta = timedelta(minutes=1),
        lease: timedelta = timedelta(minutes=10),
        on_run: Callable[..., None] | None = None,
    ) -> None:
        """`handlers` maps a job kind to a callable taking a TaskContext; `on_run(kind=, outcome=)` is told
        of every run (metrics live at the edge)."""
        self._store = store
        self._handlers = dict(handlers)
        self._instance_id = instance_id
        self._batch = batch
        self._max_attempts = max_attempts
        self._retry_after = retry_after
        self._lease = lease
        self._on_run = on_run

    @property
    def instance_id(self) -> str:
        """Who this runner claims as."""
        return self._instance_id

    def run_due(self) -> RunSummary:
        """Claim and run everything due now; errors are logged and retried per job."""
        self._store.release_stale(lease=self._lease)
        ran = failed = 0
        for job in self._store.claim_due(instance_id=self._instance_id, limit=self._batch):
            handler = self._handlers.get(job.kind)
            if handler is None:
                self._store.fail(
                    job_id=job.id,
                    instance_id=self._instance_id,
                    error=f"no handler for kind {job.kind!r}",
                    retry_at=None,
                )
                failed += 1
                self._observe(kind=job.kind, outcome="no_handler")
                continue
            with structlog.contextvars.bound_contextvars(
                job_id=job.id, job_kind=job.kind, **({"incident": job.incident_key} if job.incident_key else {})
            ):
                if self._run_one(job=job, handler=handler):
                    ran += 1
                else:
                    failed += 1
        return RunSummary(ran=ran, failed=failed)

    def _observe(self, *, kind: str, outcome: str) -> None:
        if self._on_run is not None:
            try:
                self._on_run(kind=kind, outcome=outcome)
            except Exception:
                log.warning("job observer failed", exc_info=True)

    def _run_one(self, *, job: TaskView, handler: TaskHandler) -> bool:
        """Run one claimed job; True when it finished, False when it failed (and was rescheduled or dropped)."""
        try:
            result = handler(TaskContext(job=job, store=self._store, now=self._store.clock()))
        except Exception as error:
            log.exception("scheduled job %s (%s) failed", job.id, job.kind)
            give_up = job.attempts >= self._max_attempts
            self._store.fail(
                job_id=job.id,
                instance_id=self._instance_id,
                error=f"{type(error).__name__}: {error}",
                retry_at=None if give_up else self._store.clock() + self._retry_after * job.attempts,
            )
            self._observe(kind=job.kind, outcome="failed")
            return False
        self._store.finish(job_id=job.id, instance_id=self._instance_id, result=result)
        log.info("scheduled job %s (%s) ran", job.id, job.kind)
        self._observe(kind=job.kind, outcome="ok")
        return True


class TaskScheduler:
    """An APScheduler BackgroundScheduler that polls the durable table every few seconds."""

    def __init__(self, *, runner: TaskRunner, poll_seconds: float = 5.0) -> None:
        """Nothing runs until `start()`."""
        self._runner = runner
        self._poll_seconds = poll_seconds
        self._scheduler = BackgroundScheduler(timezone="UTC")
        self._scheduler.add_job(
            self._poll,
            "interval",
            seconds=poll_seconds,
            id="triage-poll-durable-jobs",
            max_instances=1,
            coalesce=True,
            next_run_time=utcnow(),
        )

    def _poll(self) -> None:
        try:
            self._runner.run_due()
        except Exception:
            log.exception("polling scheduled jobs failed")

    @property
    def running(self) -> bool:
        """Whether the polling thread is alive (the readiness probe asks)."""
        return bool(self._scheduler.running)

    def start(self) -> None:
        """Begin polling in a background thread."""
        self._scheduler.start()

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop polling; with `wait`, let a running poll finish."""
        self._scheduler.shutdown(wait=wait)
