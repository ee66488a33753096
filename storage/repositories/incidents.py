"""Queries over the incident tables; callers own the session (and so the transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, delete, func
from sqlmodel import Session, col, select

from storage.tables.incidents import Incident, ProcessedRequest, RoleAssignment, Snapshot, TimelineEntry


def by_key(session: Session, *, key: str) -> Incident | None:
    """The incident with this human key (`INC-0042`)."""
    return session.exec(select(Incident).where(Incident.key == key)).first()


def open_for_workload(session: Session, *, workload_key: str, clusters: Sequence[str] = ("",)) -> Incident | None:
    """The one open incident for a workload on one cluster (named in `clusters`, with "" for incidents
    opened before clusters had names when it is the default one), if any."""
    statement = select(Incident).where(
        Incident.workload_key == workload_key, col(Incident.cluster).in_(list(clusters)), Incident.status != "resolved"
    )
    return session.exec(statement).first()


def open_in_channel(session: Session, *, channel_id: str) -> Sequence[Incident]:
    """Open incidents whose root message lives in this channel, newest first."""
    statement = (
        select(Incident)
        .where(Incident.channel_id == channel_id, Incident.status != "resolved")
        .order_by(Incident.id.desc())  # type: ignore[union-attr]
    )
    return session.exec(statement).all()


def all_open(session: Session) -> Sequence[Incident]:
    """Every open incident, oldest first."""
    statement = select(Incident).where(Incident.status != "resolved").order_by(Incident.id)  # type: ignore[arg-type]
    return session.exec(statement).all()


def next_number(session: Session) -> int:
    """The next human incident number (1 for the first)."""
    return int(session.exec(select(func.max(Incident.number))).one() or 0) + 1


def latest(session: Session) -> Incident | None:
    """The most recently opened incident."""
    return session.exec(select(Incident).order_by(Incident.id.desc())).first()  # type: ignore[union-attr]


def open_count_by_severity(session: Session) -> dict[str, int]:
    """Open incidents per severity (`unknown` before any snapshot), for metrics."""
    statement = (
        select(Incident.severity, func.count())
        .where(Incident.status != "resolved")
        .group_by(Incident.severity)
    )
    return {severity or "unknown": count for severity, count in session.exec(statement).all()}


def active_roles(session: Session, *, incident_id: int) -> Sequence[RoleAssignment]:
    """Current role holders, in assignment order."""
    statement = (
        select(RoleAssignment)
        .where(RoleAssignment.incident_id == incident_id, RoleAssignment.active.is_(True))  # type: ignore[attr-defined]
        .order_by(RoleAssignment.id)  # type: ignore[arg-type]
    )
    return session.exec(statement).all()


def timeline(session: Session, *, incident_id: int) -> Sequence[TimelineEntry]:
    """The incident's timeline in the order it happened."""
    statement = (
        select(TimelineEntry)
        .where(TimelineEntry.incident_id == incident_id)
        .order_by(TimelineEntry.at, TimelineEntry.id)  # type: ignore[arg-type]
    )
    return session.exec(statement).all()


def append_timeline(
    session: Session,
    *,
    incident_id: int,
    at: datetime,
    actor: str,
    kind: str,
    text: str,
    data: dict[str, Any],
) -> TimelineEntry:
    """Add one timeline entry; it is written with the caller's transaction."""
    entry = TimelineEntry(incident_id=incident_id, at=at, actor=actor, kind=kind, text=text, data=data)
    session.add(entry)
    return entry


def snapshots(session: Session, *, incident_id: int) -> Sequence[Snapshot]:
    """Stored snapshot reports, oldest first."""
    statement = select(Snapshot).where(Snapshot.incident_id == incident_id).order_by(Snapshot.id)  # type: ignore[arg-type]
    return session.exec(statement).all()


def delete_processed_before(session: Session, *, cutoff: datetime) -> int:
    """Drop request fingerprints recorded before `cutoff`; returns how many."""
    statement = delete(ProcessedRequest).where(col(ProcessedRequest.processed_at) < cutoff)
    result: CursorResult[Any] = session.execute(statement)  # type: ignore[assignment]
    return int(result.rowcount or 0)
