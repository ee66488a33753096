"""Per-channel settings: the cluster an id without `<cluster>:` means in that channel."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Column, Field, SQLModel

from storage.types import UTCDateTime


class ChannelSetting(SQLModel, table=True):
    """One Slack channel's defaults (`/triage config cluster <name>`), with who set them and when."""

    __tablename__ = "channel_setting"

    channel_id: str = Field(primary_key=True, max_length=32)
    cluster: str | None = Field(default=None, max_length=64)
    updated_by: str = Field(max_length=64)
    updated_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
