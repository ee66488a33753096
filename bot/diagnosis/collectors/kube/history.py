"""The present over the past: which observations still describe the target now, and is the target healthy?

A FailedScheduling event followed by the pod being scheduled, a crash before a container that has run and been
Ready for a while, a node warning from yesterday on a node that is healthy now: all are history. They stay in the
report (marked `current=False` with `resolved_by`), and the classifier builds its verdict from the rest. One
`target_health` observation says what was checked and whether the target is failing now.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from bot.diagnosis.collectors.kube.calls import observation, parse_time
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.collectors.kube.pods import container_roles
from bot.diagnosis.collectors.kube.workloads import is_suspended, phase_and_message, rollout
from bot.evidence.findings import Observation
from bot.evidence.targets import WorkloadKind

# A container that has run and been Ready this long since its last crash is stable: the crash is history.
STABLE_SECONDS = 600
# A node warning older than this, on a node that looks healthy now, is history.
NODE_EVENT_WINDOW_SECONDS = 3600
SCHEDULING_REASONS = frozenset({"FailedScheduling", "Unschedulable", "NotTriggerScaleUp", "FailedScaleUp"})
QUIET_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
FAILED_PHASES = frozenset({"failed", "aborted", "aborting", "terminated", "error"})
PENDING_PHASES = frozenset({"pending", "queued", "inqueue"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Facts:
    """What the snapshot read, indexed for the history rules."""

    now: datetime
    pods: dict[str, dict[str, Any]]
    containers: dict[tuple[str, str], dict[str, Any]]
    scheduled_events: dict[str, datetime]
    nodes_ok: dict[str, bool]
    healthy: bool


def _stamp(value: Any) -> datetime | None:
    return parse_time(value) if value else None


def _ago(now: datetime, when: datetime) -> str:
    seconds = max(0, int((now - when).total_seconds()))
    if seconds >= 86400:
        return f"{seconds // 86400}d ago"
    if seconds >= 3600:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 60}m ago" if seconds >= 60 else f"{seconds}s ago"


def ready_since(pod: dict[str, Any]) -> datetime | None:
    """When a Running pod last became Ready (None when it is not Running and Ready now)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return None
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if not ready or ready.get("status") != "True":
        return None
    return _stamp(ready.get("lastTransitionTime")) or _stamp(status.get("startTime"))


def stable_since(status: dict[str, Any], *, role: str, now: datetime) -> datetime | None:
    """When a container became the healthy instance it is now: running and ready (or an init container that
    completed), for at least STABLE_SECONDS; None when it is not stable."""
    state = status.get("state") or {}
    if role == "init":
        done = state.get("terminated") or {}
        return _stamp(done.get("finishedAt")) if done and done.get("exitCode") == 0 else None
    running = state.get("running") or {}
    started = _stamp(running.get("startedAt"))
    if not running or not status.get("ready") or started is None:
        return None
    return started if (now - started).total_seconds() >= STABLE_SECONDS else None


def _facts(ctx: KubeContext, observations: Sequence[Observation], *, now: datetime, healthy: bool) -> _Facts:
    pods = {f"pod/{pod['metadata']['namespace']}/{pod['metadata']['name']}": pod for pod in ctx.pods}
    containers = {}
    for subject, pod in pods.items():
        status, roles = pod.get("status") or {}, container_roles(pod)
        for item in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            containers[(subject, item["name"])] = {**item, "_role": roles.get(item["name"], "main")}
    scheduled: dict[str, datetime] = {}
    for obs in observations:
        if obs.kind == "event" and obs.fields.get("reason") == "Scheduled":
            when = _stamp(obs.fields.get("last_seen"))
            if when:
                scheduled[obs.subject] = max(when, scheduled.get(obs.subject, when))
    nodes_ok = {name: _node_ok(node) for name, node in ctx.nodes_read.items()}
    return _Facts(now=now, pods=pods, containers=containers, scheduled_events=scheduled, nodes_ok=nodes_ok,
                  healthy=healthy)


def _node_ok(node: dict[str, Any]) -> bool:
    status = node.get("status") or {}
    for condition in status.get("conditions") or []:
        kind, value = condition.get("type"), condition.get("status")
        if (kind == "Ready" and value != "True") or (kind != "Ready" and value == "True"):
            return False
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    return str(capacity.get("nvidia.com/gpu", "")) == str(allocatable.get("nvidia.com/gpu", ""))


def _pod_event(obs: Observation, facts: _Facts) -> str:
    pod = facts.pods.get(obs.subject)
    last = _stamp(obs.fields.get("last_seen"))
    if pod is None or last is None:
        return ""
    node = (pod.get("spec") or {}).get("nodeName")
    if obs.fields.get("reason") in SCHEDULING_REASONS:
        later = facts.scheduled_events.get(obs.subject)
        if node:
            return f"the pod was scheduled to {node} after it"
        if later and later >= last:
            return f"Scheduled {_ago(facts.now, later)}"
        return ""
    if obs.fields.get("type") != "Warning":
        return ""
    if (pod.get("status") or {}).get("phase") == "Succeeded":
        return "the pod completed successfully after it"
    since = ready_since(pod)
    if since is not None and since >= last and all(
            stable_since(item, role=item["_role"], now=facts.now) or item["_role"] == "init"
            for (subject, _), item in facts.containers.items() if subject == obs.subject):
        return f"the pod has been Running and Ready since {_ago(facts.now, since)}"
    return ""


def _container_history(obs: Observation, facts: _Facts) -> str:
    pod = facts.pods.get(obs.subject)
    if pod is None:
        return ""
    if (pod.get("status") or {}).get("phase") == "Succeeded":
        return "the pod completed successfully after it"
    status = facts.containers.get((obs.subject, str(obs.fields.get("container"))))
    if status is None:
        return ""
    since = stable_since(status, role=status["_role"], now=facts.now)
    if since is None:
        return ""
    if status["_role"] == "init":
        return f"init container {status['name']} completed {_ago(facts.now, since)}"
    return f"container {status['name']} running and ready since {_ago(facts.now, since)}"


def _node_event(obs: Observation, facts: _Facts) -> str:
    node = obs.subject.removeprefix("node/")
    last = _stamp(obs.fields.get("last_seen"))
    if last is None or not facts.nodes_ok.get(node):
        return ""
    if (facts.now - last).total_seconds() < NODE_EVENT_WINDOW_SECONDS:
        return ""
    return f"last seen {_ago(facts.now, last)}; {node} is Ready with all its GPUs allocatable now"


def resolved_by(obs: Observation, facts: _Facts, *, workload_subjects: set[str]) -> str:
    """Why an observation is history (empty when it still describes the present)."""
    if obs.kind == "event":
        if obs.subject.startswith("pod/"):
            return _pod_event(obs, facts)
        if obs.subject.startswith("node/"):
            return _node_event(obs, facts)
        if obs.subject in workload_subjects and facts.healthy and obs.fields.get("type") == "Warning":
            return "the workload is healthy now"
        return ""
    if obs.kind == "container_termination" or (obs.kind in ("log_line", "log_tail") and obs.fields.get("previous")):
        return _container_history(obs, facts)
    return ""


def mark(ctx: KubeContext, observations: Sequence[Observation], *, now: datetime) -> list[Observation]:
    """Every observation, with history marked `current=False` and the reason in `resolved_by`; then the
    target's health as one more observation."""
    health = target_health(ctx, observations, now=now)
    facts = _facts(ctx, observations, now=now, healthy=bool(health and health.fields["healthy"]))
    subjects = {ctx.subject} | {f"job/{ctx.namespace}/{job['metadata']['name']}" for job in ctx.children
                                if job.get("kind") == "Job"}
    marked = []
    for obs in observations:
        why = resolved_by(obs, facts, workload_subjects=subjects)
        marked.append(dataclasses.replace(obs, current=False, resolved_by=why) if why else obs)
    if health is not None:
        marked.append(health)
    return marked


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (workload.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _job_problems(job: dict[str, Any], *, label: str) -> tuple[list[str], bool]:
    """(problems, completed) of one batch Job."""
    failed, complete = _condition(job, "Failed"), _condition(job, "Complete")
    if complete.get("status") == "True":
        return [], True
    if failed.get("status") == "True":
        return [f"{label} failed ({failed.get('reason') or 'Failed'}: {failed.get('message') or ''})".strip()], False
    return [], False


def _workload_problems(ctx: KubeContext, observations: Iterable[Observation]) -> tuple[list[str], bool]:
    """What the workload's own status says is wrong now, and whether it finished successfully."""
    workload, kind = ctx.workload or {}, ctx.kind
    problems: list[str] = []
    completed = False
    if is_suspended(workload):
        problems.append("suspended (not running)")
    if kind is WorkloadKind.JOB:
        found, completed = _job_problems(workload, label="the Job")
        problems += found
    elif kind is WorkloadKind.CRONJOB:
        if ctx.children:
            found, completed = _job_problems(ctx.children[-1], label=f"the latest Job {ctx.children[-1]['metadata']['name']}")
            problems += found
        if is_suspended(workload):
            problems.remove("suspended (not running)")  # a paused schedule is a choice, not a failure
    facts = rollout(workload, kind)
    if facts and facts.get("unavailable_replicas"):
        problems.append(f"{facts['unavailable_replicas']} of {facts['replicas']} replicas unavailable")
    progressing = _condition(workload, "Progressing")
    if progressing.get("status") == "False":
        problems.append(f"rollout not progressing ({progressing.get('reason')})")
    phase, reason, message = phase_and_message(workload, kind)
    words = phase.lower().split()
    if kind is WorkloadKind.RAYJOB:
        words += [str((workload.get("status") or {}).get("jobStatus") or "").lower()]
    if any(word in FAILED_PHASES for word in words):
        problems.append(f"phase {phase}" + (f": {message or reason}" if message or reason else ""))
    elif any(word in PENDING_PHASES for word in words):
        problems.append(f"phase {phase}")
    elif any(word in ("complete", "completed", "succeeded") for word in words):
        completed = True
    if kind is WorkloadKind.INFERENCESERVICE and phase == "NotReady":
        problems.append(f"not Ready ({reason or 'no reason'}{': ' + message if message else ''})")
    if kind not in (WorkloadKind.JOB, WorkloadKind.CRONJOB, WorkloadKind.INFERENCESERVICE):
        for condition in (workload.get("status") or {}).get("conditions") or []:
            if condition.get("type") in ("Failed", "Failure") and condition.get("status") == "True":
                problems.append(f"condition {condition.get('type')} ({condition.get('reason') or ''})")
            elif condition.get("type") in ("Succeeded", "Complete", "Completed") and condition.get("status") == "True":
                completed = True
    for obs in observations:
        if obs.kind == "aiperf_status":
            rate = obs.fields.get("request_error_rate")
            if obs.fields.get("error"):
                problems.append(f"AIPerf error: {obs.fields['error']}")
            if isinstance(rate, int | float) and rate > 5:
                problems.append(f"request_error_rate.avg {rate}%")
        elif obs.kind == "kueue_workload" and not obs.fields.get("admitted"):
            problems.append("Kueue has not admitted it")
        elif obs.kind in ("kueue_workload_missing", "pods_not_found"):
            problems.append(obs.text)
    return list(dict.fromkeys(problems)), completed


def pod_problems(pod: dict[str, Any], *, now: datetime, completed: bool) -> list[str]:
    """What is wrong with one pod now (empty when it runs cleanly or finished, or its job completed anyway)."""
    name, status = pod["metadata"]["name"], pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    if phase == "Succeeded" or (completed and phase == "Failed"):
        return []
    if phase in ("Pending", "Failed", "Unknown") and not (phase == "Pending" and status.get("containerStatuses")):
        reason = next((c.get("reason") for c in status.get("conditions") or [] if c.get("status") != "True"), "")
        return [f"pod {name} {phase}" + (f" ({reason})" if reason else "")]
    problems = []
    roles = container_roles(pod)
    for item in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        role = roles.get(item["name"], "main")
        state = item.get("state") or {}
        waiting = (state.get("waiting") or {}).get("reason")
        label = f"{'' if role == 'main' else role + ' '}container {item['name']} of {name}"
        if waiting and waiting not in QUIET_WAITING:
            problems.append(f"{label} waiting: {waiting}")
        elif role == "init" and (state.get("terminated") or {}).get("exitCode") not in (None, 0):
            problems.append(f"{label} exited {(state.get('terminated') or {}).get('exitCode')}")
        elif role != "init" and not item.get("ready") and not waiting:
            problems.append(f"{label} not ready")
        elif int(item.get("restartCount") or 0) and stable_since(item, role=role, now=now) is None and role != "init":
            problems.append(f"{label} restarted {item['restartCount']} time(s) within the last "
                            f"{STABLE_SECONDS // 60} min")
    if phase != "Running" and not problems:
        waiting = sorted({(c.get("state") or {}).get("waiting", {}).get("reason") or "waiting"
                          for c in status.get("containerStatuses") or []})
        problems.append(f"pod {name} {phase} ({', '.join(waiting)})")
    return problems


def target_health(ctx: KubeContext, observations: Sequence[Observation], *, now: datetime) -> Observation | None:
    """One observation: is the target failing now, and what was checked to say so."""
    if ctx.workload is None:
        return None
    problems, completed = _workload_problems(ctx, observations)
    for pod in ctx.pods:
        problems += pod_problems(pod, now=now, completed=completed)
    running = sum(1 for pod in ctx.pods if ready_since(pod) is not None)
    succeeded = sum(1 for pod in ctx.pods if (pod.get("status") or {}).get("phase") == "Succeeded")
    containers = sum(1 for obs in observations if obs.kind == "container_state")
    kinds = [obs.kind for obs in observations]
    checked = [f"{ctx.kind_name} status and conditions", f"{len(ctx.pods)} pod(s) with {containers} container(s)",
               f"{kinds.count('event')} event group(s)", f"{kinds.count('node_capacity')} node(s)",
               f"{kinds.count('log_tail')} log tail(s)"]
    if problems:
        state = "pending" if all("Pending" in item or "phase Pending" in item or "Queued" in item
                                 or "admitted" in item or "suspended" in item for item in problems) else "failing"
    elif completed or (ctx.pods and succeeded == len(ctx.pods)):
        state = "completed"
    elif ctx.pods or rollout(ctx.workload, ctx.kind).get("replicas") == 0:
        state = "healthy"
    else:
        state, problems = "unknown", ["no pods to check"]
    healthy = state in ("healthy", "completed")
    if healthy:
        what = ("completed successfully" if state == "completed" else
                f"{running}/{len(ctx.pods)} pod(s) Running and Ready, no container restarted within the last "
                f"{STABLE_SECONDS // 60} min")
    else:
        what = "; ".join(problems[:6]) + (f" (+{len(problems) - 6} more)" if len(problems) > 6 else "")
    return observation(
        kind="target_health", source="snapshot", subject=ctx.subject, command=f"kubectl get {ctx.kind_name} "
        f"-n {ctx.namespace} {ctx.target.name} && kubectl get pods -n {ctx.namespace} -o wide", observed_at=now,
        fields={"healthy": healthy, "state": state, "problems": problems[:20], "checked": checked,
                "pods": len(ctx.pods), "pods_ready": running, "pods_succeeded": succeeded},
        text=f"{ctx.subject} is {state}: {what} (checked {', '.join(checked)})")
