"""A failing snapshot beside a healthy one: a ranked diff of what could matter, not two dumps."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from bot.evidence.findings import Observation
from bot.evidence.report import SnapshotReport

# Lower ranks first: health signals, then versions and images, then settings, then where things ran.
CATEGORY_RANK = {
    "node_condition": 1, "node_event": 2, "event_reason": 3, "container_state": 4, "gpu_capacity": 5,
    "version": 6, "image": 7, "env": 8, "resources": 9, "placement": 10,
}
WHY = {
    "node_condition": "a node condition differs: the failing run's nodes may be unhealthy",
    "node_event": "warning events on the failing run's nodes (e.g. GPU Xid) that the healthy run's nodes lack",
    "event_reason": "event reasons seen only on one side",
    "container_state": "containers ended differently",
    "gpu_capacity": "GPUs withdrawn from a node (allocatable below capacity)",
    "version": "driver, CUDA, NCCL or kubelet versions differ",
    "image": "a different image or digest ran",
    "env": "an NCCL_/CUDA_ setting differs",
    "resources": "requested or limited resources differ",
    "placement": "the runs landed on different nodes or GPU products",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Difference:
    """One thing that differs between the failing and the healthy snapshot."""

    category: str
    key: str
    failing: str
    healthy: str
    rank: int
    why: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def _joined(values: Iterable[Any]) -> str:
    return ", ".join(sorted({str(value) for value in values if value not in (None, "")}))


def facts(observations: Iterable[Observation]) -> dict[tuple[str, str], str]:
    """Reduce one snapshot to comparable (category, key) -> value facts, independent of pod and node names."""
    collected: dict[tuple[str, str], set[str]] = {}

    def add(category: str, key: str, value: Any) -> None:
        if value in (None, ""):
            return
        collected.setdefault((category, key), set()).add(str(value))

    for item in observations:
        fields = item.fields
        if item.kind == "node_condition" and fields.get("abnormal"):
            add("node_condition", str(fields.get("type")), f"{fields.get('status')} ({fields.get('reason')})")
        elif item.kind == "event" and item.subject.startswith("node/") and fields.get("type") == "Warning":
            add("node_event", str(fields.get("reason")), f"{fields.get('message')}"[:160])
        elif item.kind == "event" and fields.get("type") == "Warning":
            add("event_reason", str(fields.get("reason")), "present")
        elif item.kind == "container_state":
            add("container_state", str(fields.get("container")),
                f"{fields.get('state')} {fields.get('reason') or ''}".strip())
        elif item.kind == "container_termination":
            add("container_state", f"{fields.get('container')} last termination",
                f"{fields.get('reason')} exit {fields.get('exit_code')}")
        elif item.kind == "container_spec":
            container = str(fields.get("container"))
            add("image", container, fields.get("image"))
            for name, value in (fields.get("env") or {}).items():
                add("env", name, value)
            for kind in ("requests", "limits"):
                for resource, amount in (fields.get(kind) or {}).items():
                    add("resources", f"{container} {kind}.{resource}", amount)
        elif item.kind == "node_capacity":
            add("placement", "gpu_product", fields.get("gpu_product"))
            for name in ("driver_version", "cuda_version", "kubelet_version", "container_runtime", "kernel_version"):
                add("version", name, fields.get(name))
            capacity, allocatable = fields.get("gpu_capacity"), fields.get("gpu_allocatable")
            if capacity is not None and allocatable is not None and allocatable < capacity:
                add("gpu_capacity", "nvidia.com/gpu allocatable < capacity",
                    f"{item.subject}: {allocatable}/{capacity}")
        elif item.kind == "pod_phase":
            add("placement", "nodes", fields.get("node") or "<unscheduled>")
        elif item.kind == "log_line" and fields.get("nccl_version"):
            add("version", "nccl", fields["nccl_version"])
    return {key: _joined(values) for key, values in collected.items()}


def compare_snapshots(*, failing: SnapshotReport, healthy: SnapshotReport) -> list[Difference]:
    """Ranked differences between a failing and a healthy snapshot (health signals first)."""
    return compare_observations(failing=failing.observations, healthy=healthy.observations)


def compare_observations(
    *, failing: Iterable[Observation], healthy: Iterable[Observation]
) -> list[Difference]:
    """The same ranked diff from bare observations (e.g. an incident's stored snapshot)."""
    bad, good = facts(failing), facts(healthy)
    differences = []
    for category, key in sorted(set(bad) | set(good)):
        failing_value, healthy_value = bad.get((category, key), ""), good.get((category, key), "")
        if failing_value == healthy_value:
            continue
        differences.append(Difference(
            category=category, key=key, failing=failing_value or "(absent)", healthy=healthy_value or "(absent)",
            rank=CATEGORY_RANK.get(category, 99), why=WHY.get(category, "")))
    return sorted(differences, key=lambda item: (item.rank, item.category, item.key))
