"""Migration 0003: incidents gain their cluster (old ones keep "", the default cluster), and the open-incident
unique index becomes per cluster, on SQLite (batch mode) and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy
from alembic import command
from sqlalchemy.exc import IntegrityError

from storage import db

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _insert(connection: sqlalchemy.Connection, *, number: int, workload: str, cluster: str | None = None,
            status: str = "investigating") -> None:
    columns = {"number": number, "key": f"INC-{number:04d}", "title": "t", "target": workload,
               "target_platform": "kubernetes", "workload_key": workload, "status": status, "channel_id": "C1",
               "opened_by": "U1", "opened_at": NOW, "updated_at": NOW}
    if cluster is not None:
        columns["cluster"] = cluster
    table = sqlalchemy.table("incident", *(sqlalchemy.column(name) for name in columns))
    connection.execute(sqlalchemy.insert(table).values(**columns))


def test_incidents_opened_before_clusters_keep_an_empty_cluster_and_stay_unique(database_url: str) -> None:
    config = db.alembic_config(url=database_url)
    command.upgrade(config, "0002_records")
    engine = db.make_engine(url=database_url)
    try:
        with engine.begin() as connection:
            _insert(connection, number=1, workload="ml/train-llm")
        command.upgrade(config, "head")
        with engine.begin() as connection:
            assert connection.execute(sqlalchemy.text("SELECT cluster FROM incident")).scalar_one() == ""
            _insert(connection, number=2, workload="ml/train-llm", cluster="prod-west")  # another cluster: fine
        with pytest.raises(IntegrityError), engine.begin() as connection:
            _insert(connection, number=3, workload="ml/train-llm", cluster="prod-west")  # same cluster: refused
        with engine.begin() as connection:
            _insert(connection, number=4, workload="ml/train-llm", cluster="prod-west", status="resolved")
            tables = set(sqlalchemy.inspect(connection).get_table_names())
        assert "channel_setting" in tables
    finally:
        engine.dispose()


def test_downgrading_restores_one_open_incident_per_workload(database_url: str) -> None:
    config = db.alembic_config(url=database_url)
    db.upgrade(url=database_url)
    command.downgrade(config, "0002_records")
    engine = db.make_engine(url=database_url)
    try:
        with engine.begin() as connection:
            _insert(connection, number=1, workload="ml/train-llm")
        with pytest.raises(IntegrityError), engine.begin() as connection:
            _insert(connection, number=2, workload="ml/train-llm")
        assert "channel_setting" not in set(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    db.upgrade(url=database_url)
