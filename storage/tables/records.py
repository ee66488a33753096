"""Tables for what an incident remembers after the diagnosis: changes, measurements, prevention, jobs."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import sqlalchemy
from sqlmodel import Field, SQLModel

from storage.types import UTCDateTime


def _utc_column(*, nullable: bool = True, index: bool = False) -> Any:
    return Field(default=None, sa_type=UTCDateTime, nullable=nullable, index=index)


class Change(SQLModel, table=True):
    """One controlled change: a single lever, its expected effect, and how to undo it."""

    __tablename__ = "record_change"

    id: int | None = Field(default=None, primary_key=True)
    incident_key: str = Field(foreign_key="incident.key", index=True, max_length=32)
    what: str = Field(max_length=2000)
    variable: str = Field(max_length=300)
    expected_effect: str = Field(max_length=2000)
    metric: str = Field(max_length=200)
    unit: str = Field(default="", max_length=40)
    baseline: float | None = None
    threshold: float | None = None
    higher_is_better: bool = True
    rollback_plan: str = Field(max_length=2000)
    approved_by: str = Field(default="", max_length=200)
    proposed_by: str = Field(default="", max_length=64)
    state: str = Field(default="proposed", max_length=20, index=True)
    proposed_at: datetime | None = _utc_column(nullable=False)
    applied_at: datetime | None = _utc_column()
    validated_at: datetime | None = _utc_column()
    rolled_back_at: datetime | None = _utc_column()


class Measurement(SQLModel, table=True):
    """One number with its unit, taken in one validation window of one change."""

    __tablename__ = "record_measurement"

    id: int | None = Field(default=None, primary_key=True)
    change_id: int = Field(foreign_key="record_change.id", index=True)
    window: str = Field(max_length=60)
    metric: str = Field(max_length=200)
    value: float
    unit: str = Field(max_length=40)
    baseline: float
    threshold: float
    taken_by: str = Field(default="", max_length=64)
    taken_at: datetime | None = _utc_column(nullable=False)


class PreventionAction(SQLModel, table=True):
    """A guardrail that keeps the failure from coming back, with someone who owns it and a date."""

    __tablename__ = "record_prevention"

    id: int | None = Field(default=None, primary_key=True)
    incident_key: str = Field(foreign_key="incident.key", index=True, max_length=32)
    description: str = Field(max_length=2000)
    owner: str = Field(max_length=64)
    due_on: date
    guardrail_check: str = Field(max_length=2000)
    status: str = Field(default="open", max_length=20, index=True)
    created_at: datetime | None = _utc_column(nullable=False)
    completed_at: datetime | None = _utc_column()


class ScheduledTask(SQLModel, table=True):
    """Durable scheduled work; a replica owns a job only after its atomic claim succeeded."""

    __tablename__ = "scheduled_job"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=40, index=True)
    incident_key: str | None = Field(default=None, foreign_key="incident.key", index=True, max_length=32)
    payload: dict[str, Any] = Field(default_factory=dict, sa_type=sqlalchemy.JSON)
    dedupe_key: str | None = Field(default=None, max_length=200, unique=True)
    due_at: datetime | None = _utc_column(nullable=False, index=True)
    claimed_by: str | None = Field(default=None, max_length=120, index=True)
    claimed_at: datetime | None = _utc_column()
    done_at: datetime | None = _utc_column(index=True)
    attempts: int = 0
    last_error: str = Field(default="", max_length=2000)
    result: dict[str, Any] | None = Field(default=None, sa_type=sqlalchemy.JSON)
    created_at: datetime | None = _utc_column(nullable=False)
