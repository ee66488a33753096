"""What the Kubernetes collectors share during one snapshot: the caller, the target and what earlier stages found."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from bot.diagnosis.collectors.kube.calls import Caller
from bot.diagnosis.collectors.kube.kinds import KindSpec
from bot.evidence.targets import Target, WorkloadKind

DEFAULT_GPU_OPERATOR_NAMESPACES = ("gpu-operator",)


@dataclasses.dataclass(kw_only=True)
class KubeContext:
    """Filled stage by stage: the workload first, then its pods, then everything keyed by them."""

    target: Target
    caller: Caller
    gpu_operator_namespaces: tuple[str, ...] = DEFAULT_GPU_OPERATOR_NAMESPACES
    workload: dict[str, Any] | None = None
    kind: WorkloadKind | None = None
    spec: KindSpec | None = None
    # Objects between the workload and its pods that were read (a Deployment's ReplicaSets, a CronJob's Jobs).
    children: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # UIDs a pod's controller may carry to belong to the target (the workload's, or a child's).
    owner_uids: set[str] = dataclasses.field(default_factory=set)
    # Controllers read and found not to belong to the target (a custom resource's pod selector overlap).
    foreign_owners: set[str] = dataclasses.field(default_factory=set)
    pods: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # Nodes named by Karpenter's `Nominated` events (`nodeclaim/x` or `node/x`), per pod.
    nominations: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    # Nodes read during the snapshot (wire form), by name: the hop planner and the history pass use them.
    nodes_read: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # Nodes a hop has claimed for reading (concurrent hops to one node read it once).
    hop_nodes: set[str] = dataclasses.field(default_factory=set)
    # One-hop reads beyond the target, in words, for the report.
    followed: list[str] = dataclasses.field(default_factory=list)
    missing_groups: list[str] = dataclasses.field(default_factory=list)
    unreachable: str = ""
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def namespace(self) -> str:
        """The target's namespace (always set for Kubernetes targets)."""
        return self.target.namespace or "default"

    @property
    def kind_name(self) -> str:
        """The resolved kind as ids spell it (`deployment`, or `plural.group` for a custom resource)."""
        if self.kind:
            return self.kind.value
        if self.spec is not None:
            return self.spec.resource
        return self.target.resource or "workload"

    @property
    def subject(self) -> str:
        """`kind/ns/name` of the resolved workload (or the target as typed)."""
        return f"{self.kind_name}/{self.namespace}/{self.target.name}"

    @property
    def node_names(self) -> list[str]:
        """Nodes the target's pods are on, in first-seen order."""
        names: list[str] = []
        for pod in self.pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and node not in names:
                names.append(node)
        return names

    def follow(self, text: str) -> None:
        """Record one hop beyond the target (thread-safe; each once)."""
        with self.lock:
            if text not in self.followed:
                self.followed.append(text)

    def host_nodes(self) -> dict[str, str]:
        """Every name a log may use for a pod's host (pod name, hostname, FQDN head, pod/host IP) -> its node."""
        table: dict[str, str] = {}
        for pod in self.pods:
            spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
            node = spec.get("nodeName")
            if not node:
                continue
            table[node] = node
            names = [meta.get("name"), spec.get("hostname"), status.get("podIP"), status.get("hostIP")]
            if spec.get("hostname") and spec.get("subdomain"):
                names.append(f"{spec['hostname']}.{spec['subdomain']}")
            names += [item.get("ip") for item in status.get("podIPs") or []]
            for name in filter(None, names):
                table.setdefault(str(name), node)
        for name, node in self.nodes_read.items():
            for address in (node.get("status") or {}).get("addresses") or []:
                if address.get("address"):
                    table.setdefault(str(address["address"]), name)
        return table
