"""Server-side printing (`as=Table`) for the lab API server, with the columns a real server sends kubectl."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.lab.kube_api import ResourceType

Column = tuple[str, str, int]  # name, type, priority (1 = only with -o wide)


def human_age(timestamp: str | None, *, now: datetime | None = None) -> str:
    """kubectl's short duration: 45s, 5m, 3h, 2d."""
    if not timestamp:
        return "<unknown>"
    then = datetime.fromisoformat(timestamp)
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3600 * 3:
        return f"{seconds // 60}m"
    if seconds < 86400 * 2:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _pod_status(pod: dict[str, Any]) -> str:
    status = pod.get("status", {})
    reason = status.get("reason") or status.get("phase", "Unknown")
    for container in status.get("containerStatuses") or []:
        state = container.get("state", {})
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    return reason


def _pod_row(pod: dict[str, Any]) -> list[Any]:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    return [pod["metadata"]["name"], f"{ready}/{len(pod['spec']['containers'])}", _pod_status(pod), restarts,
            human_age(pod["metadata"].get("creationTimestamp")), pod.get("status", {}).get("podIP") or "<none>",
            pod["spec"].get("nodeName") or "<none>", "<none>", "<none>"]


def _node_row(node: dict[str, Any]) -> list[Any]:
    conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions") or []}
    status = "Ready" if conditions.get("Ready") == "True" else "NotReady"
    if node.get("spec", {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")))
    addresses = {a["type"]: a["address"] for a in node.get("status", {}).get("addresses") or []}
    info = node.get("status", {}).get("nodeInfo") or {}
    return [node["metadata"]["name"], status, roles or "<none>", human_age(node["metadata"].get("creationTimestamp")),
            info.get("kubeletVersion", ""), addresses.get("InternalIP", "<none>"),
            addresses.get("ExternalIP", "<none>"), info.get("osImage", ""), info.get("kernelVersion", ""),
            info.get("containerRuntimeVersion", "")]


def _event_row(event: dict[str, Any]) -> list[Any]:
    involved = event.get("involvedObject", {})
    source = event.get("source", {})
    return [human_age(event.get("lastTimestamp") or event.get("eventTime")), event.get("type", ""),
            event.get("reason", ""), f"{involved.get('kind', '').lower()}/{involved.get('name', '')}",
            involved.get("fieldPath", ""), ", ".join(filter(None, (source.get("component"), source.get("host")))),
            event.get("message", ""), human_age(event.get("firstTimestamp")), event.get("count", 1),
            event["metadata"]["name"]]


def _default_row(obj: dict[str, Any]) -> list[Any]:
    return [obj["metadata"]["name"], human_age(obj["metadata"].get("creationTimestamp"))]


PRINTERS: dict[str, tuple[list[Column], Callable[[dict[str, Any]], list[Any]]]] = {
    "pods": ([("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0),
              ("Restarts", "integer", 0), ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1),
              ("Nominated Node", "string", 1), ("Readiness Gates", "string", 1)], _pod_row),
    "nodes": ([("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0),
               ("Version", "string", 0), ("Internal-IP", "string", 1), ("External-IP", "string", 1),
               ("OS-Image", "string", 1), ("Kernel-Version", "string", 1), ("Container-Runtime", "string", 1)],
              _node_row),
    "events": ([("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
                ("Object", "string", 0), ("Subobject", "string", 1), ("Source", "string", 1),
                ("Message", "string", 0), ("First Seen", "string", 1), ("Count", "integer", 1),
                ("Name", "string", 1)], _event_row),
}


def table(*, rt: ResourceType, items: list[dict[str, Any]], include_object: str | None, resource_version: str,
          token: str) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table; rows carry the object (full, or metadata only as the server's default)."""
    columns, row = PRINTERS.get(rt.plural, ([("Name", "string", 0), ("Age", "string", 0)], _default_row))
    rows = []
    for item in items:
        if include_object == "None":
            embedded: dict[str, Any] | None = None
        elif include_object == "Object":
            embedded = item
        else:
            embedded = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": item["metadata"]}
        entry: dict[str, Any] = {"cells": row(item)}
        if embedded is not None:
            entry["object"] = embedded
        rows.append(entry)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if token:
        metadata["continue"] = token
    return {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
        "columnDefinitions": [
            {"name": name, "type": kind, "format": "name" if name == "Name" else "", "description": name,
             "priority": priority} for name, kind, priority in columns],
        "rows": rows,
    }
