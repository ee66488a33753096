"""Column types that behave the same on SQLite and PostgreSQL (UTC datetimes stay timezone-aware)."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy
from sqlalchemy.engine import Dialect


class UTCDateTime(sqlalchemy.types.TypeDecorator[datetime]):
    """Store UTC; always hand back timezone-aware UTC, even from SQLite which drops the offset."""

    impl = sqlalchemy.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; use bot.evidence.findings.utcnow()")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
