"""Queries over prevention actions; callers own the session (and so the transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from sqlmodel import Session, col, select

from storage.tables.records import PreventionAction


def get(session: Session, *, action_id: int) -> PreventionAction | None:
    """One prevention action by id."""
    return session.get(PreventionAction, action_id)


def add(session: Session, *, action: PreventionAction) -> PreventionAction:
    """Insert an action and flush, so it has its id (the timeline entry names it)."""
    session.add(action)
    session.flush()
    return action


def save(session: Session, *, action: PreventionAction) -> None:
    """Keep an action's new state; it is written with the caller's transaction."""
    session.add(action)


def for_incident(session: Session, *, incident_key: str) -> Sequence[PreventionAction]:
    """Every action of an incident, oldest first."""
    statement = (
        select(PreventionAction)
        .where(PreventionAction.incident_key == incident_key)
        .order_by(col(PreventionAction.id))
    )
    return session.exec(statement).all()


def overdue(session: Session, *, status: str, today: date) -> Sequence[PreventionAction]:
    """Actions in `status` due before `today`, across incidents, earliest due first."""
    statement = (
        select(PreventionAction)
        .where(PreventionAction.status == status, PreventionAction.due_on < today)
        .order_by(col(PreventionAction.due_on))
    )
    return session.exec(statement).all()
