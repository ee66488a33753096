"""Queries over received alerts; callers own the session (and so the transaction)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func
from sqlmodel import Session, select

from storage.tables.alerts import ReceivedAlert


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
