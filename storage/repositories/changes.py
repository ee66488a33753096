"""Queries over changes and their measurements; callers own the session (and so the transaction)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlmodel import Session, col, select

from storage.tables.records import Change, Measurement


def get(session: Session, *, change_id: int) -> Change | None:
    """One change by id."""
    return session.get(Change, change_id)


def add(session: Session, *, change: Change) -> Change:
    """Insert a change and flush, so it has its id (the timeline entry names it)."""
    session.add(change)
    session.flush()
    return change


def save(session: Session, *, change: Change) -> None:
    """Write a change's new state now, inside the caller's transaction."""
    session.add(change)
    session.flush()


def for_incident(session: Session, *, incident_key: str) -> Sequence[Change]:
    """Every change of an incident, oldest first."""
    statement = select(Change).where(Change.incident_key == incident_key).order_by(col(Change.id))
    return session.exec(statement).all()


def in_states(session: Session, *, incident_key: str, states: Iterable[str]) -> Sequence[Change]:
    """The incident's changes in any of `states` (the one-lever-at-a-time warning)."""
    statement = select(Change).where(Change.incident_key == incident_key, col(Change.state).in_(list(states)))
    return session.exec(statement).all()


def add_measurement(session: Session, *, measurement: Measurement) -> None:
    """Insert one window's number and flush."""
    session.add(measurement)
    session.flush()


def measurements(session: Session, *, change_id: int | None) -> Sequence[Measurement]:
    """A change's measurements in the order they were taken."""
    statement = (
        select(Measurement)
        .where(Measurement.change_id == change_id)
        .order_by(col(Measurement.taken_at), col(Measurement.id))
    )
    return session.exec(statement).all()
