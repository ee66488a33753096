"""The workload's pods (by label selector, paged): phase, conditions, container states and specs."""

from __future__ import annotations

import re
from typing import Any

from bot.diagnosis.collectors.kube.calls import observation, to_wire
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.collectors.kube.workloads import pod_selector
from bot.diagnosis.engine import Sink
from bot.evidence.targets import WorkloadKind

ENV_OF_INTEREST = re.compile(r"^(NCCL_|CUDA_|NVIDIA_|UCX_|OMPI_|TORCH_|AIPERF_|TRT)")


def collect_pods(ctx: KubeContext, sink: Sink) -> None:
    """List the workload's pods and observe each one."""
    pods: list[Any] = []
    for selector in pod_selector(ctx):
        pods, truncated = ctx.caller.list_all("/api/v1/namespaces/{namespace}/pods",
                                              path_params={"namespace": ctx.namespace}, response_type="V1PodList",
                                              query={"labelSelector": selector}, what=f"list pods -l {selector}")
        if truncated:
            sink.truncate(f"pod list capped at {ctx.caller.budget.bounds.max_items_per_list}")
        if pods:
            break
    sink.count(len(pods))
    wire = [to_wire(ctx.caller.api, pod) for pod in pods]
    uid = ((ctx.workload or {}).get("metadata") or {}).get("uid") if ctx.kind is WorkloadKind.JOB else None
    owned = [pod for pod in wire if _owned_by(pod, uid)]
    with ctx.lock:
        ctx.pods = owned
    for pod in owned:
        observe_pod(pod, sink)


def _owned_by(pod: dict[str, Any], uid: str | None) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return not uid or not owners or any(owner.get("uid") == uid for owner in owners)


def observe_pod(pod: dict[str, Any], sink: Sink) -> None:
    """Turn one pod's status into observations."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    namespace, name = meta["namespace"], meta["name"]
    subject, node = f"pod/{namespace}/{name}", spec.get("nodeName")
    describe = f"kubectl describe pod -n {namespace} {name}"
    phase = status.get("phase") or "Unknown"
    sink.observe(observation(
        kind="pod_phase", subject=subject, command=f"kubectl get pod -n {namespace} {name} -o wide",
        observed_at=status.get("startTime") or meta.get("creationTimestamp"),
        fields={"phase": phase, "node": node, "reason": status.get("reason"), "message": status.get("message"),
                "pod_ip": status.get("podIP"), "qos": status.get("qosClass")},
        text=f"{name} {phase} on {node or '<unscheduled>'}"))
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True":
            continue
        sink.observe(observation(
            kind="pod_condition", subject=subject, command=describe, observed_at=condition.get("lastTransitionTime"),
            fields={"type": condition.get("type"), "status": condition.get("status"),
                    "reason": condition.get("reason"), "message": condition.get("message"), "node": node},
            text=" ".join(filter(None, (f"{condition.get('type')}={condition.get('status')}",
                                        condition.get("reason"), condition.get("message"))))))
    specs = {c["name"]: c for c in spec.get("containers") or []}
    for container_status, init in [(c, False) for c in status.get("containerStatuses") or []] + [
            (c, True) for c in status.get("initContainerStatuses") or []]:
        _observe_container(container_status, init=init, subject=subject, node=node, describe=describe, sink=sink)
    for container in specs.values():
        _observe_spec(container, pod=pod, subject=subject, node=node, sink=sink)


def _observe_container(status: dict[str, Any], *, init: bool, subject: str, node: str | None, describe: str,
                       sink: Sink) -> None:
    state_name, state = next(iter((status.get("state") or {"waiting": {}}).items()))
    state = state or {}
    restarts = status.get("restartCount", 0)
    sink.observe(observation(
        kind="container_state", subject=subject, command=describe,
        observed_at=state.get("finishedAt") or state.get("startedAt"),
        fields={"container": status["name"], "state": state_name, "reason": state.get("reason"),
                "message": state.get("message"), "exit_code": state.get("exitCode"), "restart_count": restarts,
                "ready": status.get("ready"), "image": status.get("image"), "image_id": status.get("imageID"),
                "node": node, "init": init},
        text=f"container {status['name']} {state_name}"
             + (f" {state['reason']}" if state.get("reason") else "")
             + (f" exit {state['exitCode']}" if state.get("exitCode") is not None else "")
             + f", restarts {restarts}"))
    last = (status.get("lastState") or {}).get("terminated")
    if last:
        sink.observe(observation(
            kind="container_termination", subject=subject, command=describe, observed_at=last.get("finishedAt"),
            fields={"container": status["name"], "reason": last.get("reason"), "exit_code": last.get("exitCode"),
                    "signal": last.get("signal"), "finished_at": last.get("finishedAt"), "restart_count": restarts,
                    "node": node},
            text=f"container {status['name']} last terminated {last.get('reason')} exit {last.get('exitCode')}"
                 f" (restarts {restarts})"))


def _observe_spec(container: dict[str, Any], *, pod: dict[str, Any], subject: str, node: str | None,
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
                "requests": requests, "limits": limits, "gpus": gpus, "node": node,
                "node_selector": spec.get("nodeSelector") or {}, "tolerations": spec.get("tolerations") or []},
        text=f"container {container['name']} image {container.get('image')} gpus {gpus}"))
