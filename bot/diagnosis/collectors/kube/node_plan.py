"""The Kubernetes node snapshot plan: is this node bad, and who runs on it now?

Stage 1 reads the node by name (conditions with their age, taints, cordon state, allocatable against
capacity, GPUs included). Stage 2 reads, concurrently: the node's warning events (Xid, pressure, kubelet),
the pods bound to it (one field-selected, paged list: `spec.nodeName=<node>`), and, when Prometheus is
configured, the DCGM exporter's Xid/ECC/NVLink series for it. Stage 3 reads the log tails of failing GPU
stack pods (driver, device plugin, DCGM exporter, container toolkit) on the node. Every read is a bounded GET
under the snapshot engine, as for a job.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.config import Settings
from bot.diagnosis.collectors.gpu import node_series
from bot.diagnosis.collectors.kube import events as kube_events
from bot.diagnosis.collectors.kube import logs as kube_logs
from bot.diagnosis.collectors.kube import nodes as kube_nodes
from bot.diagnosis.collectors.kube import pods as kube_pods
from bot.diagnosis.collectors.kube.calls import (
    Caller,
    ClusterUnreachable,
    ObjectNotFound,
    observation,
    parse_time,
)
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import Sink, Stage, Step
from bot.evidence.findings import CollectorOutcome, utcnow
from bot.evidence.node_targets import NodeTarget

MAX_WORKLOADS_LISTED = 50
MAX_STACK_PODS_IN_DETAIL = 12
# Namespaces and app labels of NVIDIA's GPU operator and the standalone device plugin / DCGM exporter charts.
GPU_STACK_NAMESPACES = frozenset({"gpu-operator", "nvidia-gpu-operator", "gpu-operator-resources",
                                  "nvidia-device-plugin"})
GPU_STACK_APPS = ("nvidia-driver", "nvidia-device-plugin", "nvidia-dcgm", "dcgm-exporter",
                  "nvidia-container-toolkit", "gpu-feature-discovery", "nvidia-operator-validator",
                  "nvidia-mig-manager", "nvidia-gpu-operator", "nvidia-fabricmanager")
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclasses.dataclass(kw_only=True)
class NodeContext:
    """What the node steps share: the node once read, the pods bound to it, and the stack pods that fail."""

    target: NodeTarget
    kube: KubeContext
    settings: Settings
    node: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        """The node's name."""
        return self.target.name

    @property
    def found(self) -> bool:
        """The API server answered and knows the node."""
        return self.node is not None


def context_for(*, target: NodeTarget, settings: Settings, caller: Caller) -> NodeContext:
    """A node context over one caller (one client, one budget)."""
    return NodeContext(target=target, kube=KubeContext(target=target, caller=caller), settings=settings)


def is_gpu_stack(pod: dict[str, Any]) -> bool:
    """A pod of the GPU software stack (operator, driver, device plugin, DCGM exporter, toolkit)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    app = str(labels.get("app") or labels.get("app.kubernetes.io/name") or labels.get("k8s-app") or "")
    name = str(meta.get("name") or "")
    return (meta.get("namespace") in GPU_STACK_NAMESPACES
            or any(app.startswith(prefix) or name.startswith(prefix) for prefix in GPU_STACK_APPS))


def _age_seconds(value: Any, *, now: datetime) -> int | None:
    if not value:
        return None
    return max(0, int((now - parse_time(value)).total_seconds()))


def _read_node(ctx: NodeContext, sink: Sink) -> None:
    """One GET of the node; its conditions, taints and capacity, plus a status line with ages and cordon."""
    try:
        node = ctx.kube.caller.get("/api/v1/nodes/{name}", path_params={"name": ctx.name}, what=f"get node {ctx.name}")
    except ClusterUnreachable as exc:
        ctx.kube.unreachable = str(exc)
        raise
    except ObjectNotFound:
        sink.observe(observation(
            kind="node_not_found", subject=f"node/{ctx.name}", command=f"kubectl get node {ctx.name}",
            text=f"the cluster has no node named {ctx.name}", fields={"node": ctx.name, "found": False}))
        sink.mark(CollectorOutcome.OK, "node not found")
        return
    sink.count(1)
    with ctx.lock:
        ctx.node = node
    kube_nodes.observe_node(node, sink)
    sink.observe(_status_observation(node, now=utcnow()))


def _status_observation(node: dict[str, Any], *, now: datetime) -> Any:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    name = meta["name"]
    conditions = [
        {"type": item.get("type"), "status": item.get("status"), "reason": item.get("reason"),
         "since": item.get("lastTransitionTime"), "age_seconds": _age_seconds(item.get("lastTransitionTime"), now=now),
         "heartbeat_age_seconds": _age_seconds(item.get("lastHeartbeatTime"), now=now)}
        for item in status.get("conditions") or []
    ]
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    resources = {key: {"capacity": capacity.get(key), "allocatable": allocatable.get(key)}
                 for key in sorted(set(capacity) | set(allocatable))}
    taints = [f"{item.get('key')}={item.get('value') or ''}:{item.get('effect')}" for item in spec.get("taints") or []]
    ready = next((item for item in conditions if item["type"] == "Ready"), None)
    cordoned = bool(spec.get("unschedulable"))
    gpu = resources.get("nvidia.com/gpu") or {}
    ready_text = (f"Ready={ready['status']} for {_duration(ready['age_seconds'])}" if ready else "no Ready condition")
    text = (f"{name}: {ready_text}; {'cordoned (SchedulingDisabled)' if cordoned else 'schedulable'}; "
            f"{len(taints)} taint(s); nvidia.com/gpu allocatable {gpu.get('allocatable') or 0} of "
            f"{gpu.get('capacity') or 0}")
    return observation(
        kind="node_status", subject=f"node/{name}", command=f"kubectl get node {name} -o wide && kubectl describe node {name}",
        observed_at=meta.get("creationTimestamp"), text=text,
        fields={"node": name, "unschedulable": cordoned, "cordoned": cordoned, "conditions": conditions,
                "taints": taints, "resources": resources, "age_seconds": _age_seconds(meta.get("creationTimestamp"), now=now)})


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "unknown time"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _read_events(ctx: NodeContext, sink: Sink) -> None:
    kube_events.collect_node_events(ctx.kube, sink, node=ctx.name)


def _read_pods(ctx: NodeContext, sink: Sink) -> None:
    """The pods bound to the node: one server-side field selector, paged and capped."""
    selector = f"spec.nodeName={ctx.name}"
    items, truncated = ctx.kube.caller.list_all("/api/v1/pods", query={"fieldSelector": selector},
                                                what=f"list pods {selector}")
    sink.count(len(items))
    if truncated:
        sink.truncate(f"pods on the node capped at {ctx.kube.caller.budget.bounds.max_items_per_list}")
    with ctx.lock:
        ctx.pods = items
    stack = [pod for pod in items if is_gpu_stack(pod)]
    for pod in stack[:MAX_STACK_PODS_IN_DETAIL]:
        kube_pods.observe_pod(pod, sink)
        sink.observe(_stack_observation(pod))
    if len(stack) > MAX_STACK_PODS_IN_DETAIL:
        sink.truncate(f"{len(stack)} GPU stack pods; detail for the first {MAX_STACK_PODS_IN_DETAIL}")
    _observe_blast_radius(ctx, [pod for pod in items if not is_gpu_stack(pod)], sink, truncated=truncated)


def _stack_observation(pod: dict[str, Any]) -> Any:
    meta, status = pod["metadata"], pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for item in statuses if item.get("ready"))
    return observation(
        kind="gpu_stack_pod", subject=f"pod/{meta['namespace']}/{meta['name']}",
        command=f"kubectl get pod -n {meta['namespace']} {meta['name']} -o wide",
        observed_at=status.get("startTime") or meta.get("creationTimestamp"),
        text=f"GPU stack pod {meta['namespace']}/{meta['name']}: {ready}/{len(statuses)} containers ready",
        fields={"namespace": meta["namespace"], "pod": meta["name"], "phase": status.get("phase"),
                "ready_containers": ready, "containers": len(statuses),
                "restarts": sum(int(item.get("restartCount") or 0) for item in statuses)})


def workload_of(pod: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of the workload a pod belongs to: training labels first, then its controller."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for label, kind in (("jobset.sigs.k8s.io/jobset-name", "jobset"), ("training.kubeflow.org/job-name", "pytorchjob"),
                        ("aiperf.nvidia.com/job-id", "aiperfjob"), ("batch.kubernetes.io/job-name", "job"),
                        ("job-name", "job")):
        if labels.get(label):
            return kind, str(labels[label])
    owners = meta.get("ownerReferences") or []
    owner = next((item for item in owners if item.get("controller")), owners[0] if owners else None)
    if owner is None:
        return "pod", str(meta.get("name"))
    kind, name = str(owner.get("kind") or "").lower(), str(owner.get("name") or "")
    template_hash = labels.get("pod-template-hash")
    if kind == "replicaset" and template_hash and name.endswith(f"-{template_hash}"):
        return "deployment", name[: -len(template_hash) - 1]
    return kind, name


def _observe_blast_radius(ctx: NodeContext, pods: list[dict[str, Any]], sink: Sink, *, truncated: bool) -> None:
    """Who draining this node would move: one line per workload (pods, GPUs), and a summary."""
    grouped: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        if status.get("phase") in FINISHED_PHASES:
            continue
        kind, name = workload_of(pod)
        entry = grouped.setdefault((meta["namespace"], kind, name), {
            "namespace": meta["namespace"], "kind": kind, "name": name, "pods": [], "gpus": 0, "phases": {}})
        entry["pods"].append(meta["name"])
        entry["gpus"] += kube_pods.gpus_requested(pod)
        phase = status.get("phase") or "Unknown"
        entry["phases"][phase] = entry["phases"].get(phase, 0) + 1
    ranked = sorted(grouped.values(), key=lambda item: (-item["gpus"], item["namespace"], item["name"]))
    gpu_pods = sum(1 for item in ranked if item["gpus"])
    allocatable = ((ctx.node or {}).get("status") or {}).get("allocatable") or {}
    gpus_used = sum(item["gpus"] for item in ranked)
    for item in ranked[:MAX_WORKLOADS_LISTED]:
        sink.observe(observation(
            kind="node_workload", subject=f"{item['kind']}/{item['namespace']}/{item['name']}",
            command=f"kubectl get pods -A -o wide --field-selector spec.nodeName={ctx.name}",
            text=f"{item['kind']} {item['namespace']}/{item['name']}: {len(item['pods'])} pod(s) on {ctx.name}, "
                 f"{item['gpus']} GPU(s)",
            fields={**item, "pods": item["pods"][:20], "node": ctx.name}))
    if len(ranked) > MAX_WORKLOADS_LISTED:
        sink.truncate(f"{len(ranked)} workloads on the node; listed the first {MAX_WORKLOADS_LISTED} by GPUs")
    sink.observe(observation(
        kind="node_blast_radius", subject=f"node/{ctx.name}",
        command=f"kubectl get pods -A -o wide --field-selector spec.nodeName={ctx.name}",
        text=f"{ctx.name} runs {sum(len(item['pods']) for item in ranked)} workload pod(s) of {len(ranked)} "
             f"workload(s) ({gpu_pods} with GPUs); {gpus_used} of {allocatable.get('nvidia.com/gpu') or 0} "
             f"allocatable GPU(s) requested" + (" (pod list capped)" if truncated else ""),
        fields={"node": ctx.name, "workloads": len(ranked), "gpu_workloads": gpu_pods,
                "pods": sum(len(item["pods"]) for item in ranked), "gpus_requested": gpus_used,
                "gpu_allocatable": allocatable.get("nvidia.com/gpu"), "truncated": truncated,
                "listed": [f"{item['kind']}/{item['namespace']}/{item['name']}" for item in ranked[:MAX_WORKLOADS_LISTED]]}))


def _read_dcgm(ctx: NodeContext, sink: Sink) -> None:
    """DCGM exporter Xid, ECC and NVLink series for this node, when Prometheus is configured."""
    node_series.read_node_series(name=ctx.name, settings=ctx.settings, budget=ctx.kube.caller.budget, sink=sink)


def plan(ctx: NodeContext) -> Sequence[Stage]:
    """Stage 1 the node; stage 2 its events, pods and DCGM series; stage 3 failing GPU stack logs."""

    def stage_node() -> list[Step]:
        return [Step(collector="node", run=functools.partial(_read_node, ctx))]

    def stage_around() -> list[Step]:
        if not ctx.found:
            return []
        return [Step(collector="events", run=functools.partial(_read_events, ctx)),
                Step(collector="node.pods", run=functools.partial(_read_pods, ctx)),
                Step(collector="gpu.dcgm", run=functools.partial(_read_dcgm, ctx))]

    def stage_logs() -> list[Step]:
        if not ctx.found:
            return []
        with ctx.lock:
            ctx.kube.pods = [pod for pod in ctx.pods if is_gpu_stack(pod)][:MAX_STACK_PODS_IN_DETAIL]
        failing = [item for item in kube_logs.choose_containers(ctx.kube) if item.failing]
        return [Step(collector="logs", run=functools.partial(kube_logs.collect_log, ctx.kube, target=item))
                for item in failing]

    return (stage_node, stage_around, stage_logs)
