"""Queries over received alerts; callers own the session (and so the transaction)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from storage.tables.alerts import ReceivedAlert


def with_fingerprints(session: Session, *, fingerprints: Iterable[str]) -> Sequence[ReceivedAlert]:
    """Every recorded firing of these label sets (one query for a whole notification)."""
    return session.exec(select(ReceivedAlert).where(col(ReceivedAlert.fingerprint).in_(sorted(set(fingerprints))))).all()


def count_repeat(session: Session, *, ids: Sequence[int], at: datetime) -> None:
    """One more notification of these alerts arrived at `at` (one UPDATE)."""
    if ids:
        session.execute(update(ReceivedAlert).where(col(ReceivedAlert.id).in_(list(ids))).values(
            last_received_at=at, notifications=ReceivedAlert.notifications + 1))


def mark(session: Session, *, ids: Sequence[int], action: str, note: str, incident_key: str | None,
         target: str | None) -> None:
    """What the intake did with these alerts (one UPDATE)."""
    if ids:
        session.execute(update(ReceivedAlert).where(col(ReceivedAlert.id).in_(list(ids))).values(
            action=action, note=note[:500], incident_key=incident_key, target=None if target is None else target[:400]))


def for_incident(session: Session, *, incident_key: str) -> Sequence[ReceivedAlert]:
    """Alerts linked to an incident, in arrival order."""
    statement = select(ReceivedAlert).where(ReceivedAlert.incident_key == incident_key).order_by(
        ReceivedAlert.id)  # type: ignore[arg-type]
    return session.exec(statement).all()


def firing_count(session: Session, *, incident_key: str) -> int:
    """How many of an incident's alerts still fire."""
    statement = select(func.count()).select_from(ReceivedAlert).where(
        ReceivedAlert.incident_key == incident_key, ReceivedAlert.status == "firing")
    return int(session.exec(statement).one())
