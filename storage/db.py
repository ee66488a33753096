"""Engine, transactional sessions and schema upgrades; callers pass the URL in, nothing is global.

The core names the database only through this module (Engine, Session, IntegrityError) and the
repositories, so `bot` never imports SQLAlchemy itself (an import-linter contract keeps it so).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

__all__ = [
    "MIGRATIONS_DIR",
    "DatabaseUnavailable",
    "Engine",
    "IntegrityError",
    "Session",
    "alembic_config",
    "current_revision",
    "make_engine",
    "ping",
    "session_scope",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def make_engine(*, url: str) -> Engine:
    """One engine per process; SQLite gets thread sharing, a busy timeout and foreign keys."""
    if url.startswith("sqlite"):
        engine = sqlalchemy.create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_pre_ping=True
        )

        @sqlalchemy.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    return sqlalchemy.create_engine(url, pool_pre_ping=True)


class DatabaseUnavailable(RuntimeError):
    """The database could not be reached (down, restarting, locked); nothing of this unit was saved."""


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on success, roll back everything on any error.

    Losing the database mid-way (connection refused or dropped, SQLite locked) surfaces as
    DatabaseUnavailable, so callers can say "try again" instead of failing obscurely.
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError) as error:
        _rollback_quietly(session)
        raise DatabaseUnavailable(f"database unavailable: {type(error.orig).__name__}") from error
    except BaseException:
        _rollback_quietly(session)
        raise
    finally:
        session.close()


def _rollback_quietly(session: Session) -> None:
    """Roll back; a connection that is already gone has nothing to roll back."""
    try:
        session.rollback()
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError):
        pass


def alembic_config(*, url: str) -> Config:
    """Alembic configured in code, so `triage-bot db upgrade` works from any directory."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(*, url: str, revision: str = "head") -> None:
    """Bring the database at `url` to `revision` with the real migrations."""
    command.upgrade(alembic_config(url=url), revision)


def current_revision(*, engine: Engine) -> str | None:
    """The migration the database is at (None before the first upgrade)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def ping(*, engine: Engine) -> None:
    """Raise if the database cannot answer a trivial query (readiness)."""
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text("SELECT 1"))
