"""Queries over per-channel settings; callers own the session (and so the transaction)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from storage.tables.channels import ChannelSetting


def cluster_for(session: Session, *, channel_id: str) -> str | None:
    """The channel's default cluster, if one was set."""
    row = session.get(ChannelSetting, channel_id)
    return row.cluster if row is not None else None


def set_cluster(session: Session, *, channel_id: str, cluster: str | None, actor: str, at: datetime) -> str | None:
    """Set (or clear, with None) the channel's default cluster; returns the one it replaced."""
    row = session.get(ChannelSetting, channel_id)
    previous = row.cluster if row is not None else None
    if row is None:
        row = ChannelSetting(channel_id=channel_id, updated_by=actor, updated_at=at)
    row.cluster, row.updated_by, row.updated_at = cluster, actor, at
    session.add(row)
    return previous
