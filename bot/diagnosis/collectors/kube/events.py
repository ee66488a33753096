"""Events about the workload, its pods and their nodes: server-side field selectors, newest first, de-duplicated."""

from __future__ import annotations

import re
from typing import Any

from bot.diagnosis.collectors.kube.calls import observation
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import Sink

MAX_EVENTS_PER_OBJECT = 50
# Karpenter's `Nominated` event: "Pod should schedule on: nodeclaim/gpu-x7k2p" (", node/ip-..." once registered).
_NOMINATED = re.compile(r"\b(nodeclaim|node)/([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)\b")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def collect_object_events(ctx: KubeContext, sink: Sink, *, kind: str, name: str) -> None:
    """Events for one namespaced object (the workload or one pod)."""
    selector = f"involvedObject.name={name}"
    items, truncated = ctx.caller.list_all("/api/v1/namespaces/{namespace}/events",
                                           path_params={"namespace": ctx.namespace},
                                           query={"fieldSelector": selector}, what=f"list events {selector}",
                                           max_items=MAX_EVENTS_PER_OBJECT)
    command = f"kubectl get events -n {ctx.namespace} --field-selector {selector} --sort-by=.lastTimestamp"
    wire = _emit(ctx, sink, items=items, truncated=truncated, command=command, subject=f"{kind}/{ctx.namespace}/{name}")
    if kind == "pod":
        record_nominations(ctx, pod=name, events=wire)


def collect_node_events(ctx: KubeContext, sink: Sink, *, node: str) -> None:
    """Warning events reported against one node (GPU Xid reports, pressure, kubelet trouble)."""
    selector = f"involvedObject.kind=Node,involvedObject.name={node},type=Warning"
    items, truncated = ctx.caller.list_all("/api/v1/events", query={"fieldSelector": selector},
                                           what=f"list events {selector}", max_items=MAX_EVENTS_PER_OBJECT)
    command = f"kubectl get events -A --field-selector {selector} --sort-by=.lastTimestamp"
    _emit(ctx, sink, items=items, truncated=truncated, command=command, subject=f"node/{node}")


def _emit(ctx: KubeContext, sink: Sink, *, items: list[Any], truncated: bool, command: str,
          subject: str) -> list[dict[str, Any]]:
    sink.count(len(items))
    if truncated:
        sink.truncate(f"events capped at {MAX_EVENTS_PER_OBJECT} per object")
    merged = deduplicate([item for item in items])
    for event in merged:
        sink.observe(observation(
            kind="event", subject=subject, command=command, observed_at=event["last_seen"], fields=event,
            text=f"{event['type']} {event['reason']} (x{event['count']}): {event['message']}"))
    return merged


def nominations(message: str) -> list[tuple[str, str]]:
    """(`nodeclaim` | `node`, name) pairs an autoscaler event names; names are validated, never trusted."""
    return [(kind, name) for kind, name in _NOMINATED.findall(message or "")
            if len(name) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(name)]


def record_nominations(ctx: KubeContext, *, pod: str, events: list[dict[str, Any]]) -> None:
    """Remember the nodes and node claims Karpenter nominated a pod for (read by the follow stage)."""
    found = [f"{kind}/{name}" for event in events if event.get("reason") == "Nominated"
             for kind, name in nominations(str(event.get("message") or ""))]
    if found:
        with ctx.lock:
            ctx.nominations.setdefault(pod, [])
            ctx.nominations[pod].extend(item for item in found if item not in ctx.nominations[pod])


def _last_seen(event: dict[str, Any]) -> str:
    return event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or ""


def deduplicate(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge events with the same reason and message (summing counts); newest first."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for event in sorted(events, key=_last_seen, reverse=True):
        key = (event.get("reason") or "", event.get("message") or "")
        involved, source = event.get("involvedObject") or {}, event.get("source") or {}
        count = int(event.get("count") or 1)
        if key in merged:
            entry = merged[key]
            entry["count"] += count
            entry["duplicates"] += 1
            entry["first_seen"] = min(filter(None, (entry["first_seen"], event.get("firstTimestamp"))), default="")
            continue
        merged[key] = {
            "reason": key[0], "message": key[1], "type": event.get("type") or "Normal", "count": count,
            "duplicates": 1, "first_seen": event.get("firstTimestamp") or _last_seen(event),
            "last_seen": _last_seen(event), "involved_kind": involved.get("kind"),
            "involved_name": involved.get("name"), "namespace": (event.get("metadata") or {}).get("namespace"),
            "component": source.get("component") or event.get("reportingComponent"),
            "host": source.get("host") or event.get("reportingInstance"),
        }
    return list(merged.values())
