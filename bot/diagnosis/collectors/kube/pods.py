"""The workload's pods (label-selected, paged, owner-checked): phase, conditions, every container's state and spec."""

from __future__ import annotations

import re
from typing import Any

from bot.diagnosis.collectors.kube import kinds
from bot.diagnosis.collectors.kube.calls import ObjectNotFound, observation
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.collectors.kube.kinds import PodLookup
from bot.diagnosis.engine import Sink

ENV_OF_INTEREST = re.compile(r"^(NCCL_|CUDA_|NVIDIA_|UCX_|OMPI_|TORCH_|AIPERF_|TRT)")


MAX_INTERMEDIATE_OWNERS = 4
# Built-in controllers a custom resource may own pods through (one hop, each read by name).
_INTERMEDIATE = {"ReplicaSet": ("apps", "replicasets"), "StatefulSet": ("apps", "statefulsets"),
                 "Job": ("batch", "jobs")}


def _list(ctx: KubeContext, sink: Sink, selector: str) -> list[dict[str, Any]]:
    pods, truncated = ctx.caller.list_all("/api/v1/namespaces/{namespace}/pods",
                                          path_params={"namespace": ctx.namespace},
                                          query={"labelSelector": selector}, what=f"list pods -l {selector}")
    if truncated:
        sink.truncate(f"pod list capped at {ctx.caller.budget.bounds.max_items_per_list}")
    return pods


def _selectors(ctx: KubeContext) -> tuple[list[str], bool]:
    """Label selectors for the target's pods, and whether they are alternatives (first hit wins) or a union."""
    assert ctx.spec is not None and ctx.workload is not None
    name, workload = ctx.target.name, ctx.workload
    spec, status = workload.get("spec") or {}, workload.get("status") or {}
    lookup = ctx.spec.lookup
    if lookup is PodLookup.LABELS:
        return [f"{label}={name}" for label in ctx.spec.labels], False
    if lookup is PodLookup.SELECTOR:
        return [selector for selector in [kinds.selector_text(spec.get("selector"))] if selector], False
    if lookup is PodLookup.CRONJOB:
        jobs = [job["metadata"]["name"] for job in ctx.children]
        return ([f"batch.kubernetes.io/job-name in ({','.join(jobs)})"] if jobs else []), False
    if lookup is PodLookup.RAYJOB:
        cluster = status.get("rayClusterName")
        return ([f"ray.io/cluster={cluster}"] if cluster else []) + [f"batch.kubernetes.io/job-name={name}"], True
    if lookup is PodLookup.CUSTOM:
        own = kinds.selector_text(spec.get("selector")) or kinds.selector_text(status.get("selector"))
        return [selector for selector in (own, f"app.kubernetes.io/instance={name}") if selector], False
    return [], False


def collect_pods(ctx: KubeContext, sink: Sink) -> None:
    """List the workload's pods (selector-scoped, paged, owner-checked) and observe each one."""
    if ctx.spec is not None and ctx.spec.lookup is PodLookup.SELF:
        owned = list(ctx.pods)
    else:
        selectors, union = _selectors(ctx)
        found: dict[str, dict[str, Any]] = {}
        for selector in selectors:
            for pod in _list(ctx, sink, selector):
                found.setdefault(pod["metadata"]["uid"], pod)
            if found and not union:
                break
        owned = [pod for pod in found.values() if _belongs(ctx, sink, pod)]
        if not owned:
            _say_none_found(ctx, sink, selectors=selectors, listed=len(found))
    sink.count(len(owned))
    with ctx.lock:
        ctx.pods = owned
    for pod in owned:
        observe_pod(pod, sink)


def _say_none_found(ctx: KubeContext, sink: Sink, *, selectors: list[str], listed: int) -> None:
    if ctx.spec is not None and ctx.spec.lookup is PodLookup.CUSTOM:
        why = (f"no pods found through {' or '.join(selectors) or 'any selector'}" +
               (f" ({listed} listed, none owned by it)" if listed else "") +
               ": pods of a kind the bot does not know are found only through its spec.selector / status.selector "
               "or the app.kubernetes.io/instance label, then kept by owner reference; a bounded read cannot search "
               "a namespace by owner reference")
    elif ctx.spec is not None and ctx.spec.lookup is PodLookup.CRONJOB and not selectors:
        why = "the CronJob has no active or last-scheduled Job, so no pods to read"
    else:
        why = f"no pods match {' / '.join(selectors) or 'the workload'}"
    sink.note(why)
    sink.observe(observation(
        kind="pods_not_found", subject=ctx.subject, fields={"selectors": selectors, "listed": listed, "reason": why},
        command=f"kubectl get pods -n {ctx.namespace} -l {selectors[0]}" if selectors else
        f"kubectl get pods -n {ctx.namespace}", text=why))


def _belongs(ctx: KubeContext, sink: Sink, pod: dict[str, Any]) -> bool:
    """Kinds whose pods the workload (or a child it owns) controls keep only pods with such an owner."""
    if ctx.spec is None or not ctx.spec.owned:
        return True
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if not owners:
        return ctx.spec.lookup is PodLookup.LABELS  # the training labels name the job; a bare pod is rare but kept
    if any(owner.get("uid") in ctx.owner_uids for owner in owners):
        return True
    if ctx.spec.lookup is PodLookup.CUSTOM:
        return _owned_through_child(ctx, sink, owners)
    return False


def _owned_through_child(ctx: KubeContext, sink: Sink, owners: list[dict[str, Any]]) -> bool:
    """One hop up: a ReplicaSet / StatefulSet / Job between a custom resource and its pods, read by name."""
    for owner in owners:
        served = _INTERMEDIATE.get(str(owner.get("kind")))
        uid = owner.get("uid")
        if served is None or not owner.get("name"):
            continue
        with ctx.lock:
            known = uid in ctx.owner_uids or uid in ctx.foreign_owners
            budget_left = len(ctx.foreign_owners) + len(ctx.children) < MAX_INTERMEDIATE_OWNERS
        if known or not budget_left:
            continue
        group, plural = served
        try:
            child = ctx.caller.get(f"/apis/{group}/v1/namespaces/{{namespace}}/{plural}/{{name}}",
                                   path_params={"namespace": ctx.namespace, "name": owner["name"]},
                                   what=f"get {plural} {ctx.namespace}/{owner['name']}")
        except ObjectNotFound:
            continue
        sink.count(1)
        if any(item.get("uid") in ctx.owner_uids for item in child["metadata"].get("ownerReferences") or []):
            with ctx.lock:
                ctx.children.append(child)
                ctx.owner_uids.add(child["metadata"]["uid"])
            return True
        with ctx.lock:
            ctx.foreign_owners.add(uid)
    return any(owner.get("uid") in ctx.owner_uids for owner in owners)


def container_roles(pod: dict[str, Any]) -> dict[str, str]:
    """Container name -> `init`, `sidecar` (an init container with restartPolicy Always) or `main`."""
    spec = pod.get("spec") or {}
    roles = {c["name"]: ("sidecar" if c.get("restartPolicy") == "Always" else "init")
             for c in spec.get("initContainers") or []}
    roles.update({c["name"]: "main" for c in spec.get("containers") or []})
    return roles


def has_started(status: dict[str, Any]) -> bool:
    """A container ran at least once (so the kubelet keeps a log for it)."""
    state = status.get("state") or {}
    return bool(state.get("running") or state.get("terminated") or (status.get("lastState") or {}).get("terminated")
                or int(status.get("restartCount") or 0) > 0)


def observe_pod(pod: dict[str, Any], sink: Sink) -> None:
    """Turn one pod's status into observations: phase, conditions, then every container (init, sidecar, main)."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    namespace, name = meta["namespace"], meta["name"]
    subject, node = f"pod/{namespace}/{name}", spec.get("nodeName")
    describe = f"kubectl describe pod -n {namespace} {name}"
    phase = status.get("phase") or "Unknown"
    nominated = status.get("nominatedNodeName")
    sink.observe(observation(
        kind="pod_phase", subject=subject, command=f"kubectl get pod -n {namespace} {name} -o wide",
        observed_at=status.get("startTime") or meta.get("creationTimestamp"),
        fields={"phase": phase, "node": node, "reason": status.get("reason"), "message": status.get("message"),
                "pod_ip": status.get("podIP"), "qos": status.get("qosClass"),
                **({"nominated_node": nominated} if nominated else {}),
                **({"hostname": spec["hostname"]} if spec.get("hostname") else {})},
        text=f"{name} {phase} on {node or '<unscheduled>'}"
             + (f" (nominated node {nominated})" if nominated and not node else "")))
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True":
            continue
        sink.observe(observation(
            kind="pod_condition", subject=subject, command=describe, observed_at=condition.get("lastTransitionTime"),
            fields={"type": condition.get("type"), "status": condition.get("status"),
                    "reason": condition.get("reason"), "message": condition.get("message"), "node": node},
            text=" ".join(filter(None, (f"{condition.get('type')}={condition.get('status')}",
                                        condition.get("reason"), condition.get("message"))))))
    roles = container_roles(pod)
    for container_status in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        _observe_container(container_status, role=roles.get(container_status["name"], "main"), subject=subject,
                           node=node, describe=describe, sink=sink)
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _observe_spec(container, role=roles.get(container["name"], "main"), pod=pod, subject=subject, node=node,
                      sink=sink)


def _observe_container(status: dict[str, Any], *, role: str, subject: str, node: str | None, describe: str,
                       sink: Sink) -> None:
    state_name, state = next(iter((status.get("state") or {"waiting": {}}).items()))
    state = state or {}
    restarts = status.get("restartCount", 0)
    label = "container" if role == "main" else f"{role} container"
    sink.observe(observation(
        kind="container_state", subject=subject, command=describe,
        observed_at=state.get("finishedAt") or state.get("startedAt"),
        fields={"container": status["name"], "state": state_name, "reason": state.get("reason"),
                "message": state.get("message"), "exit_code": state.get("exitCode"), "restart_count": restarts,
                "ready": status.get("ready"), "image": status.get("image"), "image_id": status.get("imageID"),
                "node": node, "init": role != "main", **({"role": role} if role != "main" else {}),
                **({} if has_started(status) else {"started": False})},
        text=f"{label} {status['name']} {state_name}"
             + (f" {state['reason']}" if state.get("reason") else "")
             + (f" exit {state['exitCode']}" if state.get("exitCode") is not None else "")
             + f", restarts {restarts}"
             + (f": {state['message']}" if state.get("message") and state_name == "waiting" else "")))
    last = (status.get("lastState") or {}).get("terminated")
    if last:
        sink.observe(observation(
            kind="container_termination", subject=subject, command=describe, observed_at=last.get("finishedAt"),
            fields={"container": status["name"], "reason": last.get("reason"), "exit_code": last.get("exitCode"),
                    "signal": last.get("signal"), "finished_at": last.get("finishedAt"), "restart_count": restarts,
                    "message": last.get("message"), "node": node, "init": role != "main",
                    **({"role": role} if role != "main" else {})},
            text=f"{label} {status['name']} last terminated {last.get('reason')} exit {last.get('exitCode')}"
                 f" (restarts {restarts})"))


def _observe_spec(container: dict[str, Any], *, role: str, pod: dict[str, Any], subject: str, node: str | None,
                  sink: Sink) -> None:
    env = {item["name"]: item.get("value") for item in container.get("env") or []
           if ENV_OF_INTEREST.match(item.get("name", "")) and "value" in item}
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    gpus = int(str(requests.get("nvidia.com/gpu") or limits.get("nvidia.com/gpu") or 0))
    spec = pod.get("spec") or {}
    sink.observe(observation(
        kind="container_spec", subject=subject,
        command=f"kubectl get pod -n {pod['metadata']['namespace']} {pod['metadata']['name']} -o yaml",
        observed_at=pod["metadata"].get("creationTimestamp"),
        fields={"container": container["name"], "image": container.get("image"), "env": env,
                **({"role": role} if role != "main" else {}),
                "requests": requests, "limits": limits, "gpus": gpus, "node": node,
                **({"image_pull_secrets": [item.get("name") for item in spec["imagePullSecrets"]]}
                   if spec.get("imagePullSecrets") else {}),
                "node_selector": spec.get("nodeSelector") or {}, "tolerations": spec.get("tolerations") or []},
        text=f"{'container' if role == 'main' else role + ' container'} {container['name']} image "
             f"{container.get('image')} gpus {gpus}"))


def gpus_requested(pod: dict[str, Any]) -> int:
    """GPUs the pod asks for (sum over its regular containers' requests or limits)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get("nvidia.com/gpu") or (resources.get("limits") or {}).get(
            "nvidia.com/gpu")
        try:
            total += int(str(value or 0))
        except ValueError:
            continue
    return total
