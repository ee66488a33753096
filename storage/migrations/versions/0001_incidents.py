"""incident record: incidents, roles, timeline, snapshots, processed requests

Revision ID: 0001_incidents
Revises:
Create Date: 2026-11-29 22:08:13.886414
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import storage.types

revision = "0001_incidents"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "incident",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(length=400), nullable=False),
        sa.Column("target", sqlmodel.sql.sqltypes.AutoString(length=400), nullable=False),
        sa.Column("target_platform", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("workload_key", sqlmodel.sql.sqltypes.AutoString(length=400), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("severity", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column("verdict_layer", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column("channel_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("thread_ts", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True),
        sa.Column("opened_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("opened_at", storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", storage.types.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
        sa.UniqueConstraint("number"),
    )
    with op.batch_alter_table("incident", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_incident_channel_id"), ["channel_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_incident_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_incident_workload_key"), ["workload_key"], unique=False)
        batch_op.create_index(
            "uq_incident_open_workload",
            ["workload_key"],
            unique=True,
            sqlite_where=sa.text("status != 'resolved'"),
            postgresql_where=sa.text("status != 'resolved'"),
        )

    op.create_table(
        "processed_request",
        sa.Column("fingerprint", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("processed_at", storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint"),
    )
    op.create_table(
        "role_assignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("role", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("user_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("assigned_by", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("assigned_at", storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incident.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("role_assignment", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_role_assignment_incident_id"), ["incident_id"], unique=False)

    op.create_table(
        "snapshot",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("taken_at", storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("target", sqlmodel.sql.sqltypes.AutoString(length=400), nullable=False),
        sa.Column("verdict_layer", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incident.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshot_incident_id"), ["incident_id"], unique=False)

    op.create_table(
        "timeline_entry",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("at", storage.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("actor", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("text", sqlmodel.sql.sqltypes.AutoString(length=4000), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incident.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("timeline_entry", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_timeline_entry_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_timeline_entry_incident_id"), ["incident_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("timeline_entry", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_timeline_entry_incident_id"))
        batch_op.drop_index(batch_op.f("ix_timeline_entry_at"))

    op.drop_table("timeline_entry")
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshot_incident_id"))

    op.drop_table("snapshot")
    with op.batch_alter_table("role_assignment", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_role_assignment_incident_id"))

    op.drop_table("role_assignment")
    op.drop_table("processed_request")
    with op.batch_alter_table("incident", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_incident_open_workload",
            sqlite_where=sa.text("status != 'resolved'"),
            postgresql_where=sa.text("status != 'resolved'"),
        )
        batch_op.drop_index(batch_op.f("ix_incident_workload_key"))
        batch_op.drop_index(batch_op.f("ix_incident_status"))
        batch_op.drop_index(batch_op.f("ix_incident_channel_id"))

    op.drop_table("incident")
