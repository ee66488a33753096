"""The exactly-once table stays bounded: a daily durable job forgets request fingerprints past retention."""

from __future__ import annotations

from datetime import timedelta

from bot.changes.prevention import PreventionService
from bot.incidents.service import IncidentService
from bot.schedule.store import TaskRunner, TaskStore
from bot.schedule.tasks import PROCESSED_REQUEST_RETENTION, TaskKind, build_handlers, ensure_daily_prune
from tests.bot.records.recording import DictDirectory, RecordingNotifier, ScriptedRevalidator


def test_the_daily_prune_forgets_only_old_fingerprints_and_queues_tomorrows(sqlite_engine, clock) -> None:
    incidents = IncidentService(engine=sqlite_engine, diagnoser=None, clock=clock)
    store = TaskStore(engine=sqlite_engine, clock=clock)
    runs: list[tuple[str, str]] = []
    runner = TaskRunner(
        store=store,
        handlers=build_handlers(
            notifier=RecordingNotifier(),
            directory=DictDirectory(),
            revalidator=ScriptedRevalidator(original=set(), clock=clock),
            prevention=PreventionService(engine=sqlite_engine, clock=clock),
            change_lookup=lambda change_id: None,
            prune_requests=incidents.prune_processed_requests,
        ),
        instance_id="test",
        on_run=lambda *, kind, outcome: runs.append((kind, outcome)),
    )
    assert incidents.claim_request(fingerprint="cmd:old", kind="command:job")
    clock.advance(PROCESSED_REQUEST_RETENTION - timedelta(hours=1))
    assert incidents.claim_request(fingerprint="cmd:recent", kind="command:job")
    clock.advance(timedelta(hours=2))
    ensure_daily_prune(store=store, now=clock.now)
    assert ensure_daily_prune(store=store, now=clock.now) is None  # one per day, however many replicas start

    assert runner.run_due().ran == 1
    assert runs == [(TaskKind.PRUNE_PROCESSED_REQUESTS.value, "ok")]
    (done,) = [job for job in store.tasks(kind=TaskKind.PRUNE_PROCESSED_REQUESTS) if job.done_at]
    assert done.result == {"pruned": 1}
    assert not incidents.claim_request(fingerprint="cmd:recent", kind="command:job")  # still remembered
    assert incidents.claim_request(fingerprint="cmd:old", kind="command:job")  # forgotten, claimable again
    (tomorrow,) = [job for job in store.tasks(kind=TaskKind.PRUNE_PROCESSED_REQUESTS) if not job.done_at]
    assert tomorrow.due_at == clock.now + timedelta(days=1)
