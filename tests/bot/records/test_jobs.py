"""Durable jobs: claimed atomically, run once, retried per job, kept across restarts."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
import sqlalchemy

from bot.schedule.store import TaskRunner, TaskScheduler, TaskStore
from tests.bot.records.conftest import make_engine_with_tables


def test_a_due_job_is_claimed_by_one_instance_only(sqlite_engine, clock) -> None:
    store = TaskStore(engine=sqlite_engine, clock=clock)
    job_id = store.enqueue(kind="ping", due_at=clock.now - timedelta(seconds=1))
    first = store.claim_due(instance_id="replica-a")
    second = store.claim_due(instance_id="replica-b")
    assert [job.id for job in first] == [job_id]
    assert second == ()


def test_a_job_not_yet_due_is_left_alone_until_the_clock_reaches_it(sqlite_engine, clock) -> None:
    store = TaskStore(engine=sqlite_engine, clock=clock)
    store.enqueue(kind="ping", due_at=clock.now + timedelta(minutes=15))
    assert store.claim_due(instance_id="a") == ()
    clock.advance(timedelta(minutes=15))
    assert len(store.claim_due(instance_id="a")) == 1


def test_jobs_survive_a_restart_because_they_live_in_the_database(tmp_path, clock) -> None:
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    before = make_engine_with_tables(url)
    TaskStore(engine=before, clock=clock).enqueue(kind="ping", incident_key="INC-0001", due_at=clock.now)
    before.dispose()  # the process "restarts"
    after = make_engine_with_tables(url)
    ran: list[str | None] = []
    runner = TaskRunner(
        store=TaskStore(engine=after, clock=clock),
        handlers={"ping": lambda context: ran.append(context.job.incident_key)},
        instance_id="fresh",
    )
    assert runner.run_due().ran == 1
    assert ran == ["INC-0001"]
    assert runner.run_due().ran == 0  # done jobs never run again
    after.dispose()


def test_one_failing_job_does_not_stop_the_others_and_is_retried_later(sqlite_engine, clock) -> None:
    store = TaskStore(engine=sqlite_engine, clock=clock)
    ok_ids = [store.enqueue(kind="ok", due_at=clock.now) for _ in range(2)]
    bad_id = store.enqueue(kind="bad", due_at=clock.now)
    ran: list[int] = []

    def bad(context):
        raise RuntimeError("cluster unreachable")

    runner = TaskRunner(
        store=store,
        handlers={"ok": lambda context: ran.append(context.job.id), "bad": bad},
        instance_id="a",
        retry_after=timedelta(minutes=1),
        max_attempts=2,
    )
    summary = runner.run_due()
    assert (summary.ran, summary.failed) == (2, 1)
    assert sorted(ran) == sorted(ok_ids)
    failed = store.tasks(kind="bad")[0]
    assert failed.id == bad_id and failed.done_at is None and failed.claimed_by is None
    assert "cluster unreachable" in failed.last_error
    assert runner.run_due().failed == 0  # not due again yet
    clock.advance(timedelta(minutes=1))
    assert runner.run_due().failed == 1  # second and last attempt
    assert store.tasks(kind="bad")[0].done_at is not None


def test_a_handler_result_is_kept_on_the_job(sqlite_engine, clock) -> None:
    store = TaskStore(engine=sqlite_engine, clock=clock)
    store.enqueue(kind="check", due_at=clock.now)
    TaskRunner(
        store=store, handlers={"check": lambda context: {"reproduces": False}}, instance_id="a"
    ).run_due()
    assert store.tasks(kind="check")[0].result == {"reproduces": False}


def test_a_dedupe_key_queues_a_job_only_once(sqlite_engine, clock) -> None:
    store = TaskStore(engine=sqlite_engine, clock=clock)
    assert store.enqueue(kind="v", due_at=clock.now, dedupe_key="validation:1:+15m") is not None
    assert store.enqueue(kind="v", due_at=clock.now, dedupe_key="validation:1:+15m") is None
    assert len(store.tasks(kind="v")) == 1


def test_a_claim_abandoned_by_a_dead_replica_is_released_after_the_lease(sqlite_engine, clock) -> None:
    store = TaskStore(engine=sqlite_engine, clock=clock)
    store.enqueue(kind="ping", due_at=clock.now)
    assert len(store.claim_due(instance_id="dead")) == 1
    assert store.release_stale(lease=timedelta(minutes=10)) == 0
    clock.advance(timedelta(minutes=11))
    assert store.release_stale(lease=timedelta(minutes=10)) == 1
    assert [job.attempts for job in store.claim_due(instance_id="alive")] == [2]


def test_snooze_postpones_pending_jobs_of_one_incident(sqlite_engine, clock) -> None:
    store = TaskStore(engine=sqlite_engine, clock=clock)
    store.enqueue(kind="update_reminder", incident_key="INC-0001", due_at=clock.now + timedelta(minutes=5))
    store.enqueue(kind="update_reminder", incident_key="INC-0002", due_at=clock.now + timedelta(minutes=5))
    assert (
        store.postpone(kind="update_reminder", incident_key="INC-0001", until=clock.now + timedelta(hours=1))
        == 1
    )
    due = {job.incident_key: job.due_at for job in store.tasks(kind="update_reminder")}
    assert due["INC-0001"] == clock.now + timedelta(hours=1)
    assert due["INC-0002"] == clock.now + timedelta(minutes=5)


@pytest.mark.postgres
def test_two_schedulers_on_one_postgresql_run_every_due_job_exactly_once(postgres_url: str) -> None:
    engines = [make_engine_with_tables(postgres_url), sqlalchemy.create_engine(postgres_url)]
    seed = TaskStore(engine=engines[0])
    total = 120
    for index in range(total):
        seed.enqueue(kind="count", payload={"index": index}, due_at=seed.clock() - timedelta(seconds=1))

    executions: Counter[int] = Counter()
    by_instance: Counter[str] = Counter()
    lock = threading.Lock()

    def make_handler(instance: str):
        def handler(context) -> None:
            time.sleep(0.002)  # a little work, so both replicas are mid-poll together
            with lock:
                executions[context.job.id] += 1
                by_instance[instance] += 1

        return handler

    schedulers = [
        TaskScheduler(
            runner=TaskRunner(
                store=TaskStore(engine=engine),
                handlers={"count": make_handler(name)},
                instance_id=name,
                batch=3,
            ),
            poll_seconds=0.02,
        )
        for engine, name in zip(engines, ("replica-a", "replica-b"), strict=True)
    ]
    for scheduler in schedulers:
        scheduler.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(seed.tasks()) != sum(
            1 for job in seed.tasks() if job.done_at
        ):
            time.sleep(0.05)
    finally:
        for scheduler in schedulers:
            scheduler.shutdown(wait=True)
        for engine in engines:
            engine.dispose()

    assert len(executions) == total
    assert set(executions.values()) == {1}, "some job ran more than once"
    assert sum(by_instance.values()) == total
    assert set(by_instance) == {"replica-a", "replica-b"}, (
        f"both replicas should share the work: {by_instance}"
    )
