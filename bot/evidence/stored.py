"""Evidence read back from an incident's stored snapshot JSON, so Slack can diff or scope it without a re-run."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from bot.diagnosis.collectors.fabric import nccl as fabric
from bot.evidence.findings import Observation, utcnow

# Observation kinds whose text holds NCCL log lines, and the field that names the host that logged them.
_LOG_KINDS = ("nccl_error", "log_line", "log_tail")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FabricEvidence:
    """The scope decision (None when no fabric error was logged) and the NCCL error events behind it."""

    scope: dict[str, Any] | None
    events: tuple[Observation, ...]
    hosts_with_logs: tuple[str, ...]


def observation_from_dict(data: Mapping[str, Any]) -> Observation:
    """One stored observation (its `to_dict` form) back as an Observation."""
    raw_time = str(data.get("observed_at") or "")
    try:
        observed_at = datetime.fromisoformat(raw_time)
    except ValueError:
        observed_at = utcnow()
    return Observation(
        source=str(data.get("source", "")),
        kind=str(data.get("kind", "")),
        subject=str(data.get("subject", "")),
        text=str(data.get("text", "")),
        command=str(data.get("command", "")),
        observed_at=observed_at,
        fields=dict(data.get("fields") or {}),
        current=data.get("current", True) is not False,
        resolved_by=str(data.get("resolved_by") or ""),
        age_seconds=data.get("age_seconds") if isinstance(data.get("age_seconds"), int) else None,
    )


def observations_of(report: Mapping[str, Any]) -> list[Observation]:
    """Every observation a stored snapshot kept (empty for a report stored without them)."""
    return [observation_from_dict(item) for item in report.get("observations") or ()]


def host_logs(observations: Iterable[Observation]) -> dict[str, str]:
    """Log text per host (the node a pod ran on, or the host NCCL names), each line once, in order."""
    lines: dict[str, dict[str, None]] = {}
    for item in observations:
        if item.kind not in _LOG_KINDS:
            continue
        host = str(item.fields.get("host") or item.fields.get("node") or "").strip()
        if not host:
            continue
        text = str(item.fields.get("line") or item.text) if item.kind != "log_tail" else item.text
        seen = lines.setdefault(host, {})
        for line in text.splitlines():
            if line.strip():
                seen.setdefault(line, None)
    return {host: "\n".join(found) + "\n" for host, found in lines.items()}


def host_nodes(observations: Iterable[Observation]) -> dict[str, str]:
    """Names a stored snapshot resolved to nodes: pod names, hostnames and IPs (pods), log hosts and peers."""
    table: dict[str, str] = {}
    for item in observations:
        fields = item.fields
        if item.kind == "pod_phase" and fields.get("node"):
            for name in (item.subject.rsplit("/", 1)[-1], fields.get("hostname"), fields.get("pod_ip")):
                if name:
                    table.setdefault(str(name), str(fields["node"]))
        elif item.kind == "log_line":
            for name, node in ((fields.get("host"), fields.get("host_node")), (fields.get("peer"), fields.get("peer_node")),
                               (fields.get("peer_ip"), fields.get("peer_node"))):
                if name and node:
                    table.setdefault(str(name), str(node))
    return table


def fabric_evidence(*, observations: Iterable[Observation], subject: str, max_events: int = 500) -> FabricEvidence:
    """Run the fabric scope logic over the NCCL lines a snapshot collected, counting distinct nodes."""
    observations = list(observations)
    logs = host_logs(observations)
    found = fabric.fabric_observations(logs=logs, observed_at=utcnow(), subject=subject, max_events=max_events,
                                       host_nodes=host_nodes(observations))
    scope = next((item.fields for item in found if item.kind == "fabric_scope"), None)
    events = tuple(item for item in found if item.kind == "nccl_error")
    return FabricEvidence(scope=scope, events=events, hosts_with_logs=tuple(sorted(logs)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbePlan:
    """Which nodes a probe may reach: only nodes the scheduler placed the workload on, never a host that
    only a log line names (log text is the workload's, and the workload can write any host name)."""

    nodes: tuple[str, ...]  # to probe: implicated by the logs and in the scheduler's record
    ran_on: tuple[str, ...]  # every node the scheduler's record places the workload on
    refused: tuple[str, ...]  # implicated by the logs, but not a node the workload ran on


def scheduled_nodes(observations: Iterable[Observation]) -> tuple[tuple[str, ...], dict[str, str]]:
    """(nodes the workload ran on, pod name -> node) from the scheduler's own record in a snapshot: a pod's
    `spec.nodeName` (kind `pod_phase`) and a Slurm job's allocated nodes (kind `slurm_job`, `nodes`)."""
    nodes: dict[str, None] = {}
    pods: dict[str, str] = {}
    for item in observations:
        if item.kind == "pod_phase" and item.source == "kubernetes":
            node = str(item.fields.get("node") or "").strip()
            if node:
                nodes.setdefault(node, None)
                pods[item.subject.rsplit("/", 1)[-1]] = node
        elif item.kind == "slurm_job" and item.source == "slurm":
            for node in item.fields.get("nodes") or ():
                if str(node).strip():
                    nodes.setdefault(str(node).strip(), None)
    return tuple(nodes), pods


def probe_plan(*, observations: Iterable[Observation], scope: Mapping[str, Any] | None, limit: int) -> ProbePlan:
    """The nodes to probe for a fabric scope: the implicated hosts (the pair, else the suspect, else all)
    that the scheduler's record shows the workload ran on (a pod name in an NCCL prefix maps to its node)."""
    ran_on, pods = scheduled_nodes(list(observations))
    implicated: list[str] = []
    if scope:
        named = scope.get("pair") or ([scope["suspect_host"]] if scope.get("suspect_host") else scope.get("hosts"))
        implicated = [str(host) for host in named or ()]
    chosen: dict[str, None] = {}
    refused: dict[str, None] = {}
    for host in implicated:
        node = host if host in ran_on else pods.get(host)
        if node is None:
            refused.setdefault(host, None)
        elif len(chosen) < limit:
            chosen.setdefault(node, None)
    return ProbePlan(nodes=tuple(chosen), ran_on=ran_on, refused=tuple(refused))
