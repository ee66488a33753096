"""Which observations look abnormal, so unmatched ones are listed as unexplained instead of dropped."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bot.evidence import findings

_TROUBLE = re.compile(
    r"\b(error|fail(ed|ure)?|fatal|exception|panic|traceback|timed? ?out|refused|denied|unreachable|"
    r"abort(ed)?|killed|oom|warn(ing)?|invalid|cannot|unable|not found|mismatch|lost|down)\b",
    re.IGNORECASE,
)
_NORMAL_WAITING = {"containercreating", "podinitializing", ""}
_HEALTHY = {
    "ok",
    "pass",
    "passed",
    "skip",
    "healthy",
    "active",
    "linkup",
    "up",
    "true",
    "ready",
    "idle",
    "allocated",
}
_BAD_SLURM_JOB = re.compile(
    r"fail|oom|out_of_memory|timeout|cancel|preempt|boot_fail|deadline", re.IGNORECASE
)
_BAD_SLURM_NODE = re.compile(r"down|drain|fail|not_responding|\*|unknown|error", re.IGNORECASE)


def _lower(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    return "" if value is None else str(value).strip().lower()


def _number(fields: dict[str, Any], name: str) -> float:
    try:
        return float(fields.get(name) or 0)
    except (TypeError, ValueError):
        return 0.0


def _event(obs: findings.Observation) -> bool:
    return _lower(obs.fields, "type") == "warning" or bool(_TROUBLE.search(obs.text))


def _pod_condition(obs: findings.Observation) -> bool:
    return _lower(obs.fields, "status") in {"false", "unknown"}


def _container_state(obs: findings.Observation) -> bool:
    state, reason = _lower(obs.fields, "state"), _lower(obs.fields, "reason")
    if state == "waiting":
        return reason not in _NORMAL_WAITING
    if state == "terminated":
        return reason != "completed" or _number(obs.fields, "exit_code") != 0
    return _number(obs.fields, "restart_count") > 3


def _container_termination(obs: findings.Observation) -> bool:
    return _number(obs.fields, "exit_code") != 0 or _lower(obs.fields, "reason") not in {"completed", ""}


def _node_condition(obs: findings.Observation) -> bool:
    kind, status = _lower(obs.fields, "type"), _lower(obs.fields, "status")
    if kind == "ready":
        return status != "true"
    return status == "true"


def _aiperf(obs: findings.Observation) -> bool:
    return (
        bool(_lower(obs.fields, "error"))
        or _lower(obs.fields, "phase") == "failed"
        or _number(obs.fields, "request_error_rate") > 5
        or _number(obs.fields, "restarts") > 3
    )


def _health(obs: findings.Observation) -> bool:
    status = _lower(obs.fields, "status") or _lower(obs.fields, "state") or _lower(obs.fields, "result")
    return status not in _HEALTHY


def _node_capacity(obs: findings.Observation) -> bool:
    withdrawn = _number(obs.fields, "gpu_allocatable") < _number(obs.fields, "gpu_capacity")
    return withdrawn or _lower(obs.fields, "unschedulable") == "true"


def _workload_status(obs: findings.Observation) -> bool:
    return _lower(obs.fields, "suspended") == "true" or _number(obs.fields, "failed") > 0


def _probe(obs: findings.Observation) -> bool:
    ratio = obs.fields.get("ratio")
    return ratio is not None and _number(obs.fields, "ratio") < 0.9


_BY_KIND: dict[str, Callable[[findings.Observation], bool]] = {
    "text": lambda obs: bool(obs.text.strip()),
    "log_line": lambda obs: bool(_TROUBLE.search(obs.text)),
    "event": _event,
    "pod_condition": _pod_condition,
    "container_state": _container_state,
    "container_termination": _container_termination,
    "node_condition": _node_condition,
    "aiperf_status": _aiperf,
    "kueue_workload": lambda obs: _lower(obs.fields, "admitted") in {"false", ""},
    "kueue_workload_missing": lambda obs: True,
    "node_capacity": _node_capacity,
    "node_taint": lambda obs: False,
    "workload_status": _workload_status,
    "gpu_topology": lambda obs: bool(obs.fields.get("problems")),
    "slurm_pending_reason": lambda obs: _lower(obs.fields, "reason") not in {"none", ""},
    "slurm_job": lambda obs: bool(_BAD_SLURM_JOB.search(_lower(obs.fields, "state"))),
    "slurm_node": lambda obs: bool(_BAD_SLURM_NODE.search(_lower(obs.fields, "state"))),
    "gpu_xid": lambda obs: True,
    "nccl_error": lambda obs: True,
    "gpu_health": _health,
    "ib_link": _health,
    "fabric_probe": _probe,
}


def looks_abnormal(*, observation: findings.Observation) -> bool:
    """True when an observation shows trouble; normal facts (Ready nodes, Running pods) are not listed."""
    check = _BY_KIND.get(observation.kind)
    if check is not None:
        return check(observation)
    return bool(_TROUBLE.search(observation.text))
