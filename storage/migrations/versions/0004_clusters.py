"""clusters: the incident's cluster (one open incident per workload per cluster), channel defaults

Revision ID: 0004_clusters
Revises: 0003_alerts
Create Date: 2026-12-01 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import storage.types

revision = "0004_clusters"
down_revision = "0003_alerts"
branch_labels = None
depends_on = None

OPEN = "status != 'resolved'"


def upgrade() -> None:
    with op.batch_alter_table("incident", schema=None) as batch_op:
        # Existing incidents keep "": the default cluster of their kind, as they were opened.
        batch_op.add_column(
            sa.Column("cluster", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False, server_default="")
        )
    with op.batch_alter_table("incident", schema=None) as batch_op:
        batch_op.drop_index("uq_incident_open_workload")
        batch_op.create_index(
            "uq_incident_open_workload",
            ["cluster", "workload_key"],
            unique=True,
            sqlite_where=sa.text(OPEN),
            postgresql_where=sa.text(OPEN),
        )
    op.create_table(
        "channel_setting",
        sa.Column("channel_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("cluster", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("updated_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("updated_at", storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel_id"),
    )


def downgrade() -> None:
    op.drop_table("channel_setting")
    with op.batch_alter_table("incident", schema=None) as batch_op:
        batch_op.drop_index("uq_incident_open_workload")
    with op.batch_alter_table("incident", schema=None) as batch_op:
        # Back to one open incident per workload: fails loudly if two clusters hold the same workload open.
        batch_op.create_index(
            "uq_incident_open_workload",
            ["workload_key"],
            unique=True,
            sqlite_where=sa.text(OPEN),
            postgresql_where=sa.text(OPEN),
        )
        batch_op.drop_column("cluster")
