"""Alembic environment: the schema is SQLModel.metadata after importing every table module."""

from __future__ import annotations

import sqlalchemy
from alembic import context
from sqlmodel import SQLModel

import storage.tables  # noqa: F401  (registers every table on SQLModel.metadata)

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_offline() -> None:
    """Emit SQL without a connection (`alembic upgrade --sql`)."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate through a real connection; batch mode lets SQLite alter tables."""
    connectable = sqlalchemy.create_engine(
        str(config.get_main_option("sqlalchemy.url")), poolclass=sqlalchemy.pool.NullPool
    )
    with connectable.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    connectable.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
