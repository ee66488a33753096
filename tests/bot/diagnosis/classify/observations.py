"""Builders for Observations shaped like the collectors' output, so tests read as scenarios."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.evidence import findings

AT = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)


def observation(
    *, kind: str, text: str = "", subject: str = "pod/ns/train-0", **fields: Any
) -> findings.Observation:
    """One observation with a plausible source and command for its kind."""
    return findings.Observation(
        source=f"test/{kind}",
        kind=kind,
        subject=subject,
        text=text,
        command=f"kubectl get {kind}",
        observed_at=AT,
        fields=dict(fields),
    )
