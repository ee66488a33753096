"""A throwaway PostgreSQL database per test session, when TRIAGE_TEST_POSTGRES_URL is set."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy


def postgres_base_url() -> str | None:
    """The server to test against, or None to skip PostgreSQL tests."""
    return os.environ.get("TRIAGE_TEST_POSTGRES_URL") or None


@contextmanager
def fresh_postgres_database(*, prefix: str = "triage_test") -> Iterator[str]:
    """Create a uniquely named database, yield its URL, drop it afterwards (parallel-safe)."""
    base = postgres_base_url()
    if base is None:
        pytest.skip("TRIAGE_TEST_POSTGRES_URL is not set")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    url = sqlalchemy.engine.make_url(base).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(
                sqlalchemy.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"
                ),
                {"name": name},
            )
            connection.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """URL of an empty PostgreSQL database of this test's own."""
    with fresh_postgres_database() as url:
        yield url
