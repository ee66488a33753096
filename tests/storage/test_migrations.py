"""The alembic migrations build exactly the schema the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlalchemy
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

import storage.tables  # noqa: F401
from storage import db

EXPECTED_TABLES = {"incident", "role_assignment", "timeline_entry", "snapshot", "processed_request"}


def test_upgrade_creates_every_table_and_records_the_revision(database_url: str) -> None:
    db.upgrade(url=database_url)
    engine = db.make_engine(url=database_url)
    try:
        assert EXPECTED_TABLES <= set(sqlalchemy.inspect(engine).get_table_names())
        assert db.current_revision(engine=engine) is not None
    finally:
        engine.dispose()


def test_the_migrated_schema_matches_the_models(database_url: str) -> None:
    db.upgrade(url=database_url)
    engine = db.make_engine(url=database_url)
    try:
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
        assert differences == []
    finally:
        engine.dispose()


def test_downgrade_to_base_removes_the_tables_and_upgrade_restores_them(database_url: str) -> None:
    db.upgrade(url=database_url)
    command.downgrade(db.alembic_config(url=database_url), "base")
    engine = db.make_engine(url=database_url)
    try:
        assert not EXPECTED_TABLES & set(sqlalchemy.inspect(engine).get_table_names())
        db.upgrade(url=database_url)
        assert EXPECTED_TABLES <= set(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrading_twice_is_harmless(database_url: str) -> None:
    db.upgrade(url=database_url)
    db.upgrade(url=database_url)
    engine = db.make_engine(url=database_url)
    try:
        assert EXPECTED_TABLES <= set(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()
