"""What the Kubernetes collectors share during one snapshot: the caller, the target and what earlier stages found."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from bot.diagnosis.collectors.kube.calls import Caller
from bot.evidence.targets import Target, WorkloadKind


@dataclasses.dataclass(kw_only=True)
class KubeContext:
    """Filled stage by stage: the workload first, then its pods, then everything keyed by them."""

    target: Target
    caller: Caller
    workload: dict[str, Any] | None = None
    kind: WorkloadKind | None = None
    pods: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    missing_groups: list[str] = dataclasses.field(default_factory=list)
    unreachable: str = ""
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def namespace(self) -> str:
        """The target's namespace (always set for Kubernetes targets)."""
        return self.target.namespace or "default"

    @property
    def subject(self) -> str:
        """`kind/ns/name` of the resolved workload (or the target as typed)."""
        kind = self.kind.value if self.kind else "workload"
        return f"{kind}/{self.namespace}/{self.target.name}"

    @property
    def node_names(self) -> list[str]:
        """Nodes the target's pods are on, in first-seen order."""
        names: list[str] = []
        for pod in self.pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and node not in names:
                names.append(node)
        return names
