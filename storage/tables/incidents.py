"""Tables for the incident record: incidents, role assignments, timeline, snapshots, processed requests."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy
from sqlmodel import Column, Field, SQLModel

from storage.types import UTCDateTime

# Statuses in lifecycle order; an incident is open until it is resolved.
INCIDENT_STATUSES = ("investigating", "identified", "mitigated", "monitoring", "resolved")
OPEN_CONDITION = "status != 'resolved'"


def _utc_column(*, nullable: bool = False, index: bool = False) -> Any:
    return Field(sa_column=Column(UTCDateTime(), nullable=nullable, index=index))


class Incident(SQLModel, table=True):
    """One incident about one workload; `thread_ts` is the root message everything else threads under."""

    __tablename__ = "incident"
    __table_args__ = (
        # Exactly-once across replicas and Slack retries: at most one open incident per workload per cluster.
        sqlalchemy.Index(
            "uq_incident_open_workload",
            "cluster",
            "workload_key",
            unique=True,
            sqlite_where=sqlalchemy.text(OPEN_CONDITION),
            postgresql_where=sqlalchemy.text(OPEN_CONDITION),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    # Human numbering without gaps: max + 1 inside the opening transaction, unique so racing
    # replicas cannot share one (the loser retries). `key` is its display form, INC-0042.
    number: int = Field(unique=True)
    key: str = Field(max_length=32, unique=True)
    title: str = Field(max_length=400)
    target: str = Field(max_length=400)
    target_platform: str = Field(max_length=32)
    workload_key: str = Field(max_length=400, index=True)
    # The named cluster (bot/clusters); "" for incidents opened before clusters had names (the default one).
    cluster: str = Field(default="", max_length=64, sa_column_kwargs={"server_default": ""})
    status: str = Field(default="investigating", max_length=32, index=True)
    severity: str | None = Field(default=None, max_length=16)
    verdict_layer: str | None = Field(default=None, max_length=16)
    channel_id: str = Field(max_length=32, index=True)
    thread_ts: str | None = Field(default=None, max_length=32)
    opened_by: str = Field(max_length=64)
    opened_at: datetime = _utc_column()
    updated_at: datetime = _utc_column()
    resolved_at: datetime | None = _utc_column(nullable=True)


class RoleAssignment(SQLModel, table=True):
    """Who holds which role; replaced holders stay as history with `active = False`."""

    __tablename__ = "role_assignment"

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incident.id", index=True)
    role: str = Field(max_length=64)
    user_id: str = Field(max_length=64)
    assigned_by: str = Field(max_length=64)
    assigned_at: datetime = _utc_column()
    active: bool = Field(default=True)


class TimelineEntry(SQLModel, table=True):
    """Every state change, note, assignment, snapshot and change, with its actor and UTC time."""

    __tablename__ = "timeline_entry"

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incident.id", index=True)
    at: datetime = _utc_column(index=True)
    actor: str = Field(max_length=64)
    kind: str = Field(max_length=32)
    text: str = Field(max_length=4000)
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(sqlalchemy.JSON, nullable=False))


class Snapshot(SQLModel, table=True):
    """One stored snapshot report (the stable JSON schema, observations included)."""

    __tablename__ = "snapshot"

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incident.id", index=True)
    taken_at: datetime = _utc_column()
    target: str = Field(max_length=400)
    verdict_layer: str | None = Field(default=None, max_length=16)
    report: dict[str, Any] = Field(sa_column=Column(sqlalchemy.JSON, nullable=False))


class ProcessedRequest(SQLModel, table=True):
    """Fingerprints of Slack requests already handled, so a retry or a second replica does nothing."""

    __tablename__ = "processed_request"

    fingerprint: str = Field(primary_key=True, max_length=128)
    kind: str = Field(max_length=64)
    processed_at: datetime = _utc_column()
