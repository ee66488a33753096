"""The nodes the workload's pods run on: conditions, taints, GPU capacity vs allocatable, versions."""

from __future__ import annotations

from typing import Any

from bot.diagnosis.collectors.kube.calls import observation
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import Sink

PRESSURE = {"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}


def collect_node(ctx: KubeContext, sink: Sink, *, node: str, hop: str = "", expected_gpus: int = 0) -> None:
    """Read one node by name (never list the cluster's nodes) and observe it; `hop` says why when it is not the
    target's own node (nominated or claimed for a pending pod that asks for `expected_gpus`)."""
    wire = ctx.caller.get("/api/v1/nodes/{name}", path_params={"name": node}, what=f"get node {node}")
    sink.count(1)
    with ctx.lock:
        ctx.nodes_read[node] = wire
    observe_node(wire, sink, hop=hop, expected_gpus=expected_gpus)


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def observe_node(node: dict[str, Any], sink: Sink, *, hop: str = "", expected_gpus: int = 0) -> None:
    """Turn one node into observations."""
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    name, labels = meta["name"], meta.get("labels") or {}
    subject, describe = f"node/{name}", f"kubectl describe node {name}"
    for condition in status.get("conditions") or []:
        kind, value = condition.get("type"), condition.get("status")
        abnormal = (kind == "Ready" and value != "True") or (kind != "Ready" and value == "True")
        sink.observe(observation(
            kind="node_condition", subject=subject, command=describe,
            observed_at=condition.get("lastTransitionTime"),
            fields={"type": kind, "status": value, "reason": condition.get("reason"),
                    "message": condition.get("message"), "abnormal": abnormal},
            text=f"{name} condition {kind} {value}" + (f" ({condition['reason']})" if condition.get("reason") else "")))
    for taint in spec.get("taints") or []:
        sink.observe(observation(
            kind="node_taint", subject=subject, command=f"kubectl get node {name} -o jsonpath='{{.spec.taints}}'",
            fields={"key": taint.get("key"), "value": taint.get("value"), "effect": taint.get("effect")},
            text=f"{name} taint {taint.get('key')}={taint.get('value') or ''}:{taint.get('effect')}"))
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    info = status.get("nodeInfo") or {}
    addresses = {item.get("type"): item.get("address") for item in status.get("addresses") or []}
    fields = {
        "gpu_capacity": _int(capacity.get("nvidia.com/gpu")), "gpu_allocatable": _int(allocatable.get("nvidia.com/gpu")),
        "gpu_product": labels.get("nvidia.com/gpu.product"), "cpu_allocatable": allocatable.get("cpu"),
        "memory_allocatable": allocatable.get("memory"), "unschedulable": bool(spec.get("unschedulable")),
        "driver_version": labels.get("nvidia.com/cuda.driver-version.full"),
        "cuda_version": labels.get("nvidia.com/cuda.runtime-version.full"),
        "kubelet_version": info.get("kubeletVersion"), "container_runtime": info.get("containerRuntimeVersion"),
        "kernel_version": info.get("kernelVersion"), "internal_ip": addresses.get("InternalIP"),
        "hop": hop or None, "expected_gpus": expected_gpus or None,
        # A node chosen for a GPU pod that advertises no allocatable GPU joined without a working driver or
        # device plugin: placement worked, the platform did not.
        "gpus_missing": bool(expected_gpus) and not (_int(allocatable.get("nvidia.com/gpu")) or 0),
    }
    sink.observe(observation(
        kind="node_capacity", subject=subject, command=describe, fields=fields,
        text=f"{name} nvidia.com/gpu allocatable {fields['gpu_allocatable']} of {fields['gpu_capacity']}"
             f" ({fields['gpu_product'] or 'no GPU label'})"
             + (f"; {hop}, which asks for {expected_gpus} GPU(s)" if hop and expected_gpus else "")))
