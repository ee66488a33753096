"""The Kubernetes snapshot plan: which collector steps run in which stage, for one target."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from bot.diagnosis.collectors.kube import aiperf, hops, kueue
from bot.diagnosis.collectors.kube import events as kube_events
from bot.diagnosis.collectors.kube import history as kube_history
from bot.diagnosis.collectors.kube import logs as kube_logs
from bot.diagnosis.collectors.kube import nodes as kube_nodes
from bot.diagnosis.collectors.kube import pods as kube_pods
from bot.diagnosis.collectors.kube import workloads as kube_workloads
from bot.diagnosis.collectors.kube.calls import Caller, build_api_client
from bot.diagnosis.collectors.kube.context import DEFAULT_GPU_OPERATOR_NAMESPACES, KubeContext
from bot.diagnosis.engine import Budget, Stage, Step
from bot.evidence.findings import utcnow
from bot.evidence.targets import Target, WorkloadKind

MAX_PODS_IN_DETAIL = 16
MAX_NODES_IN_DETAIL = 16


def context_for(*, target: Target, budget: Budget, api_client: Any = None, kubeconfig: Any = None,
                kube_context: str | None = None, in_cluster: bool = False,
                gpu_operator_namespaces: tuple[str, ...] = DEFAULT_GPU_OPERATOR_NAMESPACES) -> KubeContext:
    """A collector context with the given client, or one built from kubeconfig / in-cluster settings."""
    api = api_client or build_api_client(kubeconfig=kubeconfig, context=kube_context, in_cluster=in_cluster,
                                         pool_size=budget.bounds.max_concurrency)
    return KubeContext(target=target, caller=Caller(api=api, budget=budget),
                       gpu_operator_namespaces=gpu_operator_namespaces)


def _pod_priority(pod: dict[str, Any]) -> int:
    """Failing pods first so the detail caps keep what matters."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if any(int(item.get("restartCount") or 0) or (item.get("state") or {}).get("waiting")
           or ((item.get("state") or {}).get("terminated") or {}).get("exitCode") for item in statuses):
        return 0
    return 0 if (pod.get("status") or {}).get("phase") in ("Pending", "Failed", "Unknown") else 1


def _failing(pod: dict[str, Any]) -> bool:
    """A pod on a node that is failing now (a restart long ago on a container that has run cleanly since is not)."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return False
    return bool(kube_history.pod_problems(pod, now=utcnow(), completed=False))


def plan(ctx: KubeContext) -> Sequence[Stage]:
    """Stage 1 finds the workload (and the children between it and its pods), stage 2 its pods/queue/status,
    stage 3 events, nodes, GPU operator pods under failing pods and logs, stage 4 one hop beyond the target
    (the node a pending pod was nominated or claimed for)."""

    def stage_workload() -> list[Step]:
        return [Step(collector="workload", run=functools.partial(kube_workloads.resolve_workload, ctx))]

    def stage_members() -> list[Step]:
        if ctx.workload is None:
            return []
        return [Step(collector="pods", run=functools.partial(kube_pods.collect_pods, ctx)),
                Step(collector="kueue", run=functools.partial(kueue.collect_kueue, ctx)),
                Step(collector="aiperf", run=functools.partial(aiperf.collect_aiperf, ctx))]

    def stage_details() -> list[Step]:
        if ctx.workload is None:
            return []
        ctx.pods.sort(key=_pod_priority)
        pods = ctx.pods[:MAX_PODS_IN_DETAIL]
        steps = [Step(collector="events", run=functools.partial(
            kube_events.collect_object_events, ctx, kind=ctx.kind_name, name=ctx.target.name))]
        steps += [Step(collector="events", run=functools.partial(
            kube_events.collect_object_events, ctx, kind="job", name=job["metadata"]["name"]))
            for job in ctx.children if job.get("kind") == "Job"]
        if ctx.kind is not WorkloadKind.POD:
            steps += [Step(collector="events", run=functools.partial(
                kube_events.collect_object_events, ctx, kind="pod", name=pod["metadata"]["name"])) for pod in pods]
        nodes = ctx.node_names[:MAX_NODES_IN_DETAIL]
        for node in nodes:
            steps.append(Step(collector="nodes", run=functools.partial(kube_nodes.collect_node, ctx, node=node)))
            steps.append(Step(collector="events", run=functools.partial(
                kube_events.collect_node_events, ctx, node=node)))
        failing_nodes = list(dict.fromkeys((pod.get("spec") or {}).get("nodeName") for pod in pods if _failing(pod)))
        steps += [Step(collector="hops", run=functools.partial(
            hops.collect_operator_pods, ctx, node=node, why=f"{node} runs a failing pod of the target"))
            for node in failing_nodes[:hops.MAX_HOP_NODES]]
        pod_names = {pod["metadata"]["name"] for pod in pods}
        steps += [Step(collector="logs", run=functools.partial(kube_logs.collect_log, ctx, target=target))
                  for target in kube_logs.choose_containers(ctx) if target.pod in pod_names]
        if len(ctx.pods) > MAX_PODS_IN_DETAIL:
            steps.append(Step(collector="pods", run=functools.partial(
                _note, note=f"{len(ctx.pods)} pods; events and logs read for the first {MAX_PODS_IN_DETAIL}")))
        return steps

    def stage_follow() -> list[Step]:
        if ctx.workload is None:
            return []
        return [Step(collector="hops", run=functools.partial(hops.follow_pending, ctx, target=target, why=why,
                                                             gpus=gpus))
                for target, why, gpus in hops.plan_pending_hops(ctx)]

    return (stage_workload, stage_members, stage_details, stage_follow)


def _note(sink: Any, *, note: str) -> None:
    sink.truncate(note)
