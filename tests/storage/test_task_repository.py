"""The scheduled-task repository against the migrated schema: claims, ownership and dedupe across
transactions, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from storage import db
from storage.repositories import tasks as task_repo
from storage.tables.incidents import Incident
from storage.tables.records import ScheduledTask

NOW = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


@pytest.fixture
def engine(database_url: str) -> Iterator[db.Engine]:
    db.upgrade(url=database_url)
    engine = db.make_engine(url=database_url)
    yield engine
    engine.dispose()


def add(engine: db.Engine, **fields: object) -> int:
    """One committed task, due a second ago unless told otherwise."""
    values: dict[str, object] = {"kind": "ping", "due_at": NOW - timedelta(seconds=1), "created_at": NOW}
    values.update(fields)
    with db.session_scope(engine) as session:
        task_id = task_repo.add(session, task=ScheduledTask(**values))  # type: ignore[arg-type]
    assert task_id is not None
    return task_id


def open_incident(engine: db.Engine, *, key: str = "INC-0001") -> str:
    """An incident row for tasks to belong to (incident_key is a foreign key)."""
    with db.session_scope(engine) as session:
        session.add(
            Incident(
                number=int(key.rsplit("-", 1)[1]),
                key=key,
                title="t",
                target="ml/train",
                target_platform="kubernetes",
                workload_key=f"kubernetes:{key}",
                channel_id="C1",
                opened_by="U1",
                opened_at=NOW,
                updated_at=NOW,
            )
        )
    return key


def stored(engine: db.Engine) -> dict[int, ScheduledTask]:
    with db.session_scope(engine) as session:
        return {row.id: row for row in task_repo.listing(session) if row.id is not None}


def test_a_replica_cannot_finish_or_fail_a_task_another_replica_claimed(engine: db.Engine) -> None:
    task_id = add(engine)
    with db.session_scope(engine) as session:
        assert [row["id"] for row in task_repo.claim_due(session, instance_id="a", now=NOW, limit=5)] == [
            task_id
        ]
    with db.session_scope(engine) as session:
        task_repo.finish(session, task_id=task_id, instance_id="b", now=NOW, result={"by": "b"})
        task_repo.close_failed(session, task_id=task_id, instance_id="b", error="boom", now=NOW)
        task_repo.release_for_retry(
            session, task_id=task_id, instance_id="b", error="boom", retry_at=NOW + timedelta(hours=1)
        )
    untouched = stored(engine)[task_id]
    assert (untouched.claimed_by, untouched.done_at, untouched.last_error, untouched.result) == (
        "a",
        None,
        "",
        None,
    )
    with db.session_scope(engine) as session:
        task_repo.finish(session, task_id=task_id, instance_id="a", now=NOW, result={"by": "a"})
    finished = stored(engine)[task_id]
    assert finished.done_at == NOW and finished.result == {"by": "a"}


def test_cancelling_by_dedupe_prefix_reads_like_wildcards_literally(engine: db.Engine) -> None:
    key = open_incident(engine)
    literal = add(engine, incident_key=key, dedupe_key="50%_off:1")
    lookalike = add(engine, incident_key=key, dedupe_key="50xyoff:1")  # matches 50%_off: as a LIKE pattern
    with db.session_scope(engine) as session:
        cancelled = task_repo.cancel(
            session, kind="ping", incident_key=key, now=NOW, dedupe_prefix="50%_off:"
        )
    rows = stored(engine)
    assert cancelled == 1
    assert (rows[literal].done_at, rows[literal].last_error) == (NOW, "cancelled")
    assert rows[lookalike].done_at is None


def test_postpone_moves_only_pending_tasks_due_before_the_new_time(engine: db.Engine) -> None:
    key = open_incident(engine)
    until = NOW + timedelta(hours=1)
    soon = NOW + timedelta(minutes=5)
    pending = add(engine, incident_key=key, due_at=soon)
    later = add(engine, incident_key=key, due_at=NOW + timedelta(hours=2))
    claimed = add(engine, incident_key=key, due_at=soon, claimed_by="a", claimed_at=NOW)
    done = add(engine, incident_key=key, due_at=soon, done_at=NOW)
    with db.session_scope(engine) as session:
        assert task_repo.postpone(session, kind="ping", incident_key=key, until=until) == 1
    rows = stored(engine)
    assert {task_id: rows[task_id].due_at for task_id in (pending, later, claimed, done)} == {
        pending: until,
        later: NOW + timedelta(hours=2),
        claimed: soon,
        done: soon,
    }


def test_losing_a_dedupe_race_returns_none_and_leaves_the_callers_transaction_usable(
    engine: db.Engine,
) -> None:
    with db.session_scope(engine) as session:
        assert not task_repo.has_dedupe_key(session, dedupe_key="prune:2026-11-20")
        add(engine, dedupe_key="prune:2026-11-20")  # another replica commits the same key meanwhile
        racing = ScheduledTask(kind="ping", dedupe_key="prune:2026-11-20", due_at=NOW, created_at=NOW)
        assert task_repo.add(session, task=racing) is None
        unrelated = task_repo.add(
            session,
            task=ScheduledTask(kind="ping", dedupe_key="prune:2026-11-21", due_at=NOW, created_at=NOW),
        )
        assert unrelated is not None
    assert sorted(row.dedupe_key or "" for row in stored(engine).values()) == [
        "prune:2026-11-20",
        "prune:2026-11-21",
    ]


@pytest.mark.postgres
def test_on_postgresql_a_claim_skips_tasks_another_replica_is_claiming_instead_of_waiting(
    postgres_url: str,
) -> None:
    db.upgrade(url=postgres_url)
    engine = db.make_engine(url=postgres_url)
    try:
        ids = [add(engine, due_at=NOW - timedelta(seconds=4 - index)) for index in range(4)]
        with db.session_scope(engine) as first:
            held = [row["id"] for row in task_repo.claim_due(first, instance_id="a", now=NOW, limit=2)]
            with db.session_scope(engine) as second:
                # Waiting on the first replica's row locks would hit this and fail the test.
                second.connection().exec_driver_sql("SET LOCAL lock_timeout = '2s'")
                taken = [row["id"] for row in task_repo.claim_due(second, instance_id="b", now=NOW, limit=4)]
        assert held == ids[:2]
        assert taken == ids[2:]
        assert {row.claimed_by for row in stored(engine).values()} == {"a", "b"}
    finally:
        engine.dispose()
