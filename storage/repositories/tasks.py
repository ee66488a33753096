"""Queries over durable scheduled tasks; callers own the session (and so the transaction).

A claim is a conditional UPDATE (`... WHERE id = :id AND claimed_by IS NULL`): the database lets exactly
one replica win. On PostgreSQL candidates are picked with `FOR UPDATE SKIP LOCKED` so replicas do not
queue behind each other. Every other write is also conditional on the task still being unclaimed (or
claimed by the caller), so a replica never changes a task another one holds. These statements are plain
SQL on the session's connection (no ORM unit of work between replicas).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy
from sqlalchemy.engine import RowMapping
from sqlmodel import Session, select

from storage.tables.records import ScheduledTask

_TASKS: sqlalchemy.Table = ScheduledTask.__table__  # type: ignore[attr-defined]  # SQLModel sets it


def has_dedupe_key(session: Session, *, dedupe_key: str) -> bool:
    """Whether a task with this dedupe key was ever added (done or not)."""
    found = session.exec(select(ScheduledTask.id).where(ScheduledTask.dedupe_key == dedupe_key))
    return found.first() is not None


def add(session: Session, *, task: ScheduledTask) -> int | None:
    """Insert a task in a savepoint; None when a concurrent replica added the same dedupe key first."""
    try:
        with session.begin_nested():
            session.add(task)
    except sqlalchemy.exc.IntegrityError:
        return None
    return task.id


def claim_due(session: Session, *, instance_id: str, now: datetime, limit: int) -> list[RowMapping]:
    """Claim up to `limit` tasks due at `now` for `instance_id`, earliest first; the claimed rows."""
    table = _TASKS
    query = (
        sqlalchemy.select(table.c.id)
        .where(table.c.done_at.is_(None), table.c.claimed_by.is_(None), table.c.due_at <= now)
        .order_by(table.c.due_at, table.c.id)
        .limit(limit)
    )
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    candidates = connection.execute(query).scalars().all()
    claimed: list[RowMapping] = []
    for task_id in candidates:
        won = _changed(
            session,
            sqlalchemy.update(table)
            .where(table.c.id == task_id, table.c.claimed_by.is_(None), table.c.done_at.is_(None))
            .values(claimed_by=instance_id, claimed_at=now, attempts=table.c.attempts + 1),
        )
        if won == 1:
            claimed.append(
                connection.execute(sqlalchemy.select(table).where(table.c.id == task_id)).mappings().one()
            )
    return claimed


def finish(
    session: Session, *, task_id: int, instance_id: str, now: datetime, result: Mapping[str, Any] | None
) -> None:
    """Mark a task `instance_id` claimed as done at `now`, keeping what it found."""
    table = _TASKS
    session.connection().execute(
        sqlalchemy.update(table)
        .where(table.c.id == task_id, table.c.claimed_by == instance_id)
        .values(done_at=now, result=dict(result) if result is not None else None)
    )


def release_for_retry(
    session: Session, *, task_id: int, instance_id: str, error: str, retry_at: datetime
) -> None:
    """Give a failed task back, due again at `retry_at`."""
    table = _TASKS
    session.connection().execute(
        sqlalchemy.update(table)
        .where(table.c.id == task_id, table.c.claimed_by == instance_id)
        .values(last_error=error, claimed_by=None, claimed_at=None, due_at=retry_at)
    )


def close_failed(session: Session, *, task_id: int, instance_id: str, error: str, now: datetime) -> None:
    """Close a failed task for good at `now`."""
    table = _TASKS
    session.connection().execute(
        sqlalchemy.update(table)
        .where(table.c.id == task_id, table.c.claimed_by == instance_id)
        .values(last_error=error, done_at=now)
    )


def release_stale(session: Session, *, cutoff: datetime) -> int:
    """Free unfinished claims taken before `cutoff`; returns how many."""
    table = _TASKS
    return _changed(
        session,
        sqlalchemy.update(table)
        .where(table.c.done_at.is_(None), table.c.claimed_by.is_not(None), table.c.claimed_at < cutoff)
        .values(claimed_by=None, claimed_at=None),
    )


def has_pending(session: Session, *, kind: str, incident_key: str) -> bool:
    """Whether a task of this kind waits (unclaimed, not done) for this incident."""
    table = _TASKS
    query = (
        sqlalchemy.select(table.c.id)
        .where(
            table.c.kind == kind,
            table.c.incident_key == incident_key,
            table.c.done_at.is_(None),
            table.c.claimed_by.is_(None),
        )
        .limit(1)
    )
    return session.connection().execute(query).first() is not None


def postpone(session: Session, *, kind: str, incident_key: str, until: datetime) -> int:
    """Move pending tasks of one kind for one incident that are due before `until` to `until`."""
    table = _TASKS
    return _changed(
        session,
        sqlalchemy.update(table)
        .where(
            table.c.kind == kind,
            table.c.incident_key == incident_key,
            table.c.done_at.is_(None),
            table.c.claimed_by.is_(None),
            table.c.due_at < until,
        )
        .values(due_at=until),
    )


def cancel(
    session: Session, *, kind: str, incident_key: str, now: datetime, dedupe_prefix: str | None = None
) -> int:
    """Close pending tasks of one kind for one incident (only those whose dedupe key starts with
    `dedupe_prefix`, when given) as cancelled at `now`; returns how many."""
    table = _TASKS
    conditions = [
        table.c.kind == kind,
        table.c.incident_key == incident_key,
        table.c.done_at.is_(None),
        table.c.claimed_by.is_(None),
    ]
    if dedupe_prefix is not None:
        conditions.append(table.c.dedupe_key.startswith(dedupe_prefix, autoescape=True))
    return _changed(
        session, sqlalchemy.update(table).where(*conditions).values(done_at=now, last_error="cancelled")
    )


def listing(
    session: Session, *, incident_key: str | None = None, kind: str | None = None
) -> Sequence[ScheduledTask]:
    """Every task (done or not), by due time, optionally of one incident and one kind."""
    query = select(ScheduledTask).order_by(_TASKS.c.due_at, _TASKS.c.id)
    if incident_key is not None:
        query = query.where(ScheduledTask.incident_key == incident_key)
    if kind is not None:
        query = query.where(ScheduledTask.kind == kind)
    return session.exec(query).all()


def _changed(session: Session, statement: sqlalchemy.Update) -> int:
    """Run an UPDATE on the session's connection; how many rows it changed."""
    return int(session.connection().execute(statement).rowcount or 0)
