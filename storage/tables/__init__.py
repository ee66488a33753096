"""Import every table module so SQLModel.metadata (and alembic) sees the whole schema."""

from __future__ import annotations

from storage.tables import alerts as tables_alerts
from storage.tables import channels as tables_channels
from storage.tables import incidents as tables_incidents
from storage.tables import records as tables_records
from storage.tables.incidents import Incident, ProcessedRequest, RoleAssignment, Snapshot, TimelineEntry

TABLE_MODULES = (tables_incidents, tables_records, tables_alerts, tables_channels)

__all__ = ["TABLE_MODULES", "Incident", "ProcessedRequest", "RoleAssignment", "Snapshot", "TimelineEntry"]
