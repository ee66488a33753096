"""Every alert Alertmanager sent, whether it opened an incident, linked one, or was only recorded."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy
from sqlmodel import Column, Field, SQLModel

from storage.types import UTCDateTime


def _utc(*, nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime(), nullable=nullable, index=index))


class ReceivedAlert(SQLModel, table=True):
    """One alert (Alertmanager fingerprint + startsAt): repeated notifications update it, never duplicate it."""

    __tablename__ = "received_alert"
    __table_args__ = (
        sqlalchemy.UniqueConstraint("fingerprint", "starts_at", name="uq_received_alert_identity"),
    )

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str = Field(max_length=64)
    starts_at: datetime | None = _utc()
    alertname: str = Field(max_length=200, index=True)
    status: str = Field(max_length=16, index=True)
    labels: dict[str, Any] = Field(default_factory=dict, sa_column=Column(sqlalchemy.JSON, nullable=False))
    annotations: dict[str, Any] = Field(default_factory=dict, sa_column=Column(sqlalchemy.JSON, nullable=False))
    ends_at: datetime | None = _utc(nullable=True)
    generator_url: str = Field(default="", max_length=4096)
    external_url: str = Field(default="", max_length=4096)
    receiver: str = Field(default="", max_length=256)
    group_key: str = Field(default="", max_length=4096)
    rule: str = Field(default="", max_length=64)
    # open (linked to `incident_key`), record (no rule opens it), unmapped (a rule opens it, no target from
    # its labels), held (the storm guard recorded it instead of opening another incident)
    action: str = Field(default="record", max_length=16)
    note: str = Field(default="", max_length=500)
    target: str | None = Field(default=None, max_length=400)
    incident_key: str | None = Field(default=None, max_length=32, index=True)
    first_received_at: datetime | None = _utc()
    last_received_at: datetime | None = _utc(index=True)
    notifications: int = Field(default=1)
