"""Engines for the records tests: a SQLite file per test, and PostgreSQL when available."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy
from sqlmodel import SQLModel

import storage.tables  # noqa: F401 - registers every table on SQLModel.metadata


class FakeClock:
    """A clock the test moves by hand, so scheduled work fires without sleeping."""

    def __init__(self, *, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now = self.now + delta


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=datetime(2026, 11, 20, 14, 0, tzinfo=UTC))


def make_engine_with_tables(url: str) -> sqlalchemy.Engine:
    engine = sqlalchemy.create_engine(url)
    SQLModel.metadata.create_all(engine)
    return engine


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sqlalchemy.Engine]:
    engine = make_engine_with_tables(f"sqlite:///{tmp_path / 'records.db'}")
    yield engine
    engine.dispose()
