"""The snapshot report: the stable schema every surface (Slack, terminal JSON, records) renders."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.evidence import findings

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """What the classifier made of a set of observations."""

    verdict: findings.Verdict
    findings: tuple[findings.Finding, ...]
    unexplained: tuple[findings.Observation, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class SnapshotReport:
    """One bounded snapshot of one target, classified.

    `placement` holds the handoff's "versions and placement" facts (images, digests, nodes, GPU
    products, driver/CUDA/NCCL versions) as flat string pairs; `not_checked` lists what bounds,
    permissions or errors kept us from looking at; `followed` lists the one-hop reads beyond the target
    (a nominated or claimed node, the GPU operator pods on a node) and why each was made.
    """

    target: str
    target_kind: str
    taken_at: datetime
    elapsed_ms: int
    verdict: findings.Verdict
    findings: tuple[findings.Finding, ...]
    collectors: tuple[findings.CollectorReport, ...]
    observations: tuple[findings.Observation, ...] = ()
    placement: dict[str, str] = dataclasses.field(default_factory=dict)
    not_checked: tuple[str, ...] = ()
    unexplained: tuple[findings.Observation, ...] = ()
    followed: tuple[str, ...] = ()
    cluster: str = ""  # the named cluster it was taken on (`triage-bot clusters`)

    def to_dict(self, *, include_observations: bool = False) -> dict[str, Any]:
        """The documented JSON schema (docs/snapshot-schema.md)."""
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "target": self.target,
            "target_kind": self.target_kind,
            "cluster": self.cluster,
            "taken_at": findings._plain(self.taken_at),
            "verdict": self.verdict.to_dict(),
            "findings": [finding.to_dict() for finding in self.findings],
            "collectors": [report.to_dict() for report in self.collectors],
            "placement": dict(self.placement),
            "not_checked": list(self.not_checked),
            "unexplained": [item.to_dict() for item in self.unexplained],
            "followed": list(self.followed),
            "elapsed_ms": self.elapsed_ms,
        }
        if include_observations:
            data["observations"] = [item.to_dict() for item in self.observations]
        return data


class SnapshotUnavailable(Exception):
    """No snapshot could be taken (cluster unreachable, workload not found); the message is for the user."""


# The incident service takes one of these, so it never knows which cluster or lab answers.
Diagnoser = Callable[..., SnapshotReport]
