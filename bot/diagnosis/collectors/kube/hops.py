"""Follow the evidence one hop: the node a pending pod was nominated or claimed for, and the GPU operator / device
plugin pods on a node. Each hop is one GET by name or one field-selected list, inside the snapshot's budget, and
is recorded in the report's `followed` list."""

from __future__ import annotations

import re
from typing import Any

from bot.diagnosis.collectors.kube import events as kube_events
from bot.diagnosis.collectors.kube import nodes as kube_nodes
from bot.diagnosis.collectors.kube import pods as kube_pods
from bot.diagnosis.collectors.kube.calls import GroupNotServed, ObjectNotFound, observation
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import Sink

MAX_HOP_NODES = 4
MAX_OPERATOR_PODS = 50
NODECLAIM_VERSIONS = ("v1", "v1beta1")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# In a shared namespace such as kube-system only NVIDIA's components count.
_GPU_COMPONENT = re.compile(r"nvidia|gpu|dcgm|mig-manager|device-plugin", re.IGNORECASE)


def plan_pending_hops(ctx: KubeContext) -> list[tuple[str, str, int]]:
    """(`node/x` or `nodeclaim/x`, why, GPUs asked) for pending pods' nominated or claimed nodes, deduplicated."""
    hops: dict[str, tuple[str, int]] = {}
    for pod in ctx.pods:
        if (pod.get("spec") or {}).get("nodeName"):
            continue
        name = pod["metadata"]["name"]
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        candidates = [(f"node/{nominated}", f"status.nominatedNodeName of pending pod {name}")] if nominated and \
            _DNS1123_SUBDOMAIN.fullmatch(nominated) else []
        candidates += [(item, f"Karpenter nominated pending pod {name} for {item}")
                       for item in ctx.nominations.get(name, [])]
        for target, why in candidates:
            hops.setdefault(target, (why, kube_pods.gpus_requested(pod)))
    # A claim and the node it registered as are one place: keep the claim (it names the node) first.
    ordered = sorted(hops.items(), key=lambda item: not item[0].startswith("nodeclaim/"))
    return [(target, why, gpus) for target, (why, gpus) in ordered[:MAX_HOP_NODES]]


def follow_pending(ctx: KubeContext, sink: Sink, *, target: str, why: str, gpus: int) -> None:
    """Read the claim (if any), then its node: conditions, GPUs, taints, warnings and GPU operator pods."""
    kind, _, name = target.partition("/")
    node = name
    if kind == "nodeclaim":
        claim = _read_claim(ctx, sink, name=name, why=why)
        node = ((claim or {}).get("status") or {}).get("nodeName") or ""
        if not node or not _DNS1123_SUBDOMAIN.fullmatch(node):
            ctx.follow(f"nodeclaim/{name}: {why}; no node registered yet")
            return
        why = f"{why}, registered as node {node}"
    with ctx.lock:
        taken = node in ctx.nodes_read or node in ctx.hop_nodes
        ctx.hop_nodes.add(node)
    if taken:
        ctx.follow(f"{target}: {why} (node read once)")
        return
    ctx.follow(f"node/{node}: {why}")
    kube_nodes.collect_node(ctx, sink, node=node, hop=why, expected_gpus=gpus)
    kube_events.collect_node_events(ctx, sink, node=node)
    collect_operator_pods(ctx, sink, node=node, why=why)


def _read_claim(ctx: KubeContext, sink: Sink, *, name: str, why: str) -> dict[str, Any] | None:
    for version in NODECLAIM_VERSIONS:
        try:
            claim = ctx.caller.get(f"/apis/karpenter.sh/{version}/nodeclaims/{{name}}", path_params={"name": name},
                                   what=f"get nodeclaim {name}")
        except GroupNotServed:
            continue
        except ObjectNotFound:
            ctx.follow(f"nodeclaim/{name}: {why}; it no longer exists")
            return None
        sink.count(1)
        _observe_claim(claim, sink, why=why)
        return claim
    sink.note("karpenter.sh is not served: node claims cannot be followed")
    return None


def _observe_claim(claim: dict[str, Any], sink: Sink, *, why: str) -> None:
    meta, status = claim.get("metadata") or {}, claim.get("status") or {}
    name = meta.get("name", "")
    conditions = [{key: item.get(key) for key in ("type", "status", "reason", "message")}
                  for item in status.get("conditions") or []]
    failing = [item for item in conditions if item.get("status") != "True"]
    labels = meta.get("labels") or {}
    message = "; ".join(f"{item['type']}={item['status']} {item.get('reason') or ''}: {item.get('message') or ''}"
                        for item in failing)
    sink.observe(observation(
        kind="nodeclaim", source="kubernetes", subject=f"nodeclaim/{name}",
        command=f"kubectl describe nodeclaim {name}",
        fields={"node": status.get("nodeName"), "nodepool": labels.get("karpenter.sh/nodepool"),
                "instance_type": labels.get("node.kubernetes.io/instance-type"), "conditions": conditions,
                "ready": any(item["type"] == "Ready" and item["status"] == "True" for item in conditions),
                "message": message or None, "hop": why},
        text=f"NodeClaim {name} -> node {status.get('nodeName') or '<none yet>'}"
             + (f": {message}" if message else ": all conditions True")))


def collect_operator_pods(ctx: KubeContext, sink: Sink, *, node: str, why: str) -> None:
    """The GPU operator / device plugin pods on one node: one field-selected list per operator namespace."""
    selector = f"spec.nodeName={node}"
    found: list[dict[str, Any]] = []
    for namespace in ctx.gpu_operator_namespaces:
        items, truncated = ctx.caller.list_all("/api/v1/namespaces/{namespace}/pods",
                                               path_params={"namespace": namespace}, query={"fieldSelector": selector},
                                               what=f"list pods -n {namespace} --field-selector {selector}",
                                               max_items=MAX_OPERATOR_PODS)
        if truncated:
            sink.truncate(f"GPU operator pods on {node} capped at {MAX_OPERATOR_PODS}")
        found += [pod for pod in items if namespace != "kube-system" or _GPU_COMPONENT.search(pod["metadata"]["name"])]
    sink.count(len(found))
    ctx.follow(f"GPU operator pods on node/{node} ({', '.join(ctx.gpu_operator_namespaces)}): {why}")
    unhealthy = []
    for pod in found:
        fields = _operator_fields(pod, node=node)
        if not fields["healthy"]:
            unhealthy.append(pod["metadata"]["name"])
        meta = pod["metadata"]
        sink.observe(observation(
            kind="gpu_operator_pod", subject=f"pod/{meta['namespace']}/{meta['name']}",
            command=f"kubectl get pods -n {meta['namespace']} --field-selector {selector} -o wide",
            observed_at=(pod.get("status") or {}).get("startTime"), fields=fields,
            text=f"{fields['component']} pod {meta['name']} on {node}: {fields['phase']}"
                 + (f", {fields['waiting_reason']}" if fields["waiting_reason"] else "")
                 + (f", last terminated {fields['last_reason']} exit {fields['last_exit_code']}"
                    if fields["last_reason"] else "")
                 + f", ready {fields['ready']}, restarts {fields['restarts']}"))
    sink.observe(observation(
        kind="gpu_operator_pods", subject=f"node/{node}", command=f"kubectl get pods -A --field-selector {selector}",
        fields={"node": node, "namespaces": list(ctx.gpu_operator_namespaces), "count": len(found),
                "unhealthy": unhealthy, "components": sorted({_component(pod) for pod in found})},
        text=f"{len(found)} GPU operator / device plugin pod(s) on {node}"
             + (f", not ready: {', '.join(unhealthy)}" if unhealthy else "")))


def _component(pod: dict[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get("app") or labels.get("app.kubernetes.io/component") or pod["metadata"]["name"])


def _operator_fields(pod: dict[str, Any], *, node: str) -> dict[str, Any]:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    inits = status.get("initContainerStatuses") or []
    waiting = next(((c.get("state") or {}).get("waiting") for c in inits + containers
                    if (c.get("state") or {}).get("waiting")), None) or {}
    last = next(((c.get("lastState") or {}).get("terminated") for c in inits + containers
                 if (c.get("lastState") or {}).get("terminated")), None) or {}
    ready = bool(containers) and all(c.get("ready") for c in containers)
    phase = status.get("phase") or "Unknown"
    return {"component": _component(pod), "node": node, "namespace": pod["metadata"]["namespace"],
            "pod": pod["metadata"]["name"], "phase": phase, "ready": ready,
            "restarts": sum(int(c.get("restartCount") or 0) for c in inits + containers),
            "waiting_reason": waiting.get("reason"), "message": waiting.get("message") or last.get("message"),
            "last_reason": last.get("reason"), "last_exit_code": last.get("exitCode"),
            "healthy": phase == "Succeeded" or (phase == "Running" and ready)}
