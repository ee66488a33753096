"""Find the target workload (Job, JobSet, PyTorchJob, AIPerfJob in that order) and observe its status."""

from __future__ import annotations

import dataclasses
from typing import Any

from bot.diagnosis.collectors.kube.calls import (
    ClusterUnreachable,
    GroupNotServed,
    ObjectNotFound,
    observation,
    to_wire,
)
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import Sink
from bot.evidence.findings import CollectorOutcome
from bot.evidence.targets import WorkloadKind

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CustomKind:
    """Where a CRD-backed workload kind is served."""

    group: str
    version: str
    plural: str
    pod_label: str


CUSTOM_KINDS = {
    WorkloadKind.JOBSET: CustomKind(group="jobset.x-k8s.io", version="v1alpha2", plural="jobsets",
                                    pod_label="jobset.sigs.k8s.io/jobset-name"),
    WorkloadKind.PYTORCHJOB: CustomKind(group="kubeflow.org", version="v1", plural="pytorchjobs",
                                        pod_label="training.kubeflow.org/job-name"),
    WorkloadKind.AIPERFJOB: CustomKind(group="aiperf.nvidia.com", version="v1alpha1", plural="aiperfjobs",
                                       pod_label="aiperf.nvidia.com/job-id"),
}
LOOKUP_ORDER = (WorkloadKind.JOB, WorkloadKind.JOBSET, WorkloadKind.PYTORCHJOB, WorkloadKind.AIPERFJOB)


def _read(ctx: KubeContext, kind: WorkloadKind) -> dict[str, Any]:
    name, namespace = ctx.target.name, ctx.namespace
    where = {"namespace": namespace, "name": name}
    if kind is WorkloadKind.JOB:
        job = ctx.caller.get("/apis/batch/v1/namespaces/{namespace}/jobs/{name}", path_params=where,
                             response_type="V1Job", what=f"get job {namespace}/{name}")
        return to_wire(ctx.caller.api, job)
    custom = CUSTOM_KINDS[kind]
    return ctx.caller.get(f"/apis/{custom.group}/{custom.version}/namespaces/{{namespace}}/{custom.plural}/{{name}}",
                          path_params=where, response_type="object",
                          what=f"get {custom.plural}.{custom.group} {namespace}/{name}")


def resolve_workload(ctx: KubeContext, sink: Sink) -> None:
    """Look the target up by kind (or in the documented order) and record what was found."""
    kinds = (ctx.target.kind,) if ctx.target.kind else LOOKUP_ORDER
    tried: list[str] = []
    for kind in kinds:
        tried.append(kind.value)
        try:
            workload = _read(ctx, kind)
        except ObjectNotFound:
            continue
        except GroupNotServed:
            group = CUSTOM_KINDS[kind].group if kind in CUSTOM_KINDS else "batch"
            ctx.missing_groups.append(group)
            if ctx.target.kind:
                sink.observe(observation(
                    kind="api_group_missing", source="snapshot", subject=ctx.subject,
                    text=f"the cluster does not serve {group} (is the {kind.value} CRD installed?)",
                    command=f"kubectl api-resources --api-group={group}",
                    fields={"collector": "workload", "group": group, "status": 404}))
            continue
        except ClusterUnreachable as exc:
            ctx.unreachable = str(exc)
            raise
        sink.count(1)
        ctx.workload, ctx.kind = workload, kind
        _observe_workload(ctx, sink)
        return
    sink.observe(observation(
        kind="workload_not_found", source="kubernetes", subject=ctx.subject,
        text=f"no {' / '.join(tried)} named {ctx.target.name} in namespace {ctx.namespace}",
        command=f"kubectl get {','.join(tried)} -n {ctx.namespace} {ctx.target.name}",
        fields={"namespace": ctx.namespace, "name": ctx.target.name, "tried": tried}))
    sink.mark(CollectorOutcome.OK, f"not found as {', '.join(tried)}")


def _observe_workload(ctx: KubeContext, sink: Sink) -> None:
    assert ctx.workload is not None and ctx.kind is not None
    workload, kind = ctx.workload, ctx.kind
    spec, status = workload.get("spec") or {}, workload.get("status") or {}
    labels = (workload.get("metadata") or {}).get("labels") or {}
    conditions = [{key: item.get(key) for key in ("type", "status", "reason", "message")}
                  for item in status.get("conditions") or []]
    command = f"kubectl get {kind.value} -n {ctx.namespace} {ctx.target.name} -o yaml"
    fields = {
        "kind": kind.value, "namespace": ctx.namespace, "name": ctx.target.name,
        "suspended": is_suspended(workload), "active": status.get("active"), "failed": status.get("failed"),
        "succeeded": status.get("succeeded"), "parallelism": spec.get("parallelism"),
        "queue_name": labels.get(QUEUE_LABEL), "conditions": conditions,
    }
    state = "suspended" if fields["suspended"] else (status.get("phase") or "")
    sink.observe(observation(
        kind="workload_status", subject=ctx.subject, command=command, fields=fields,
        observed_at=(workload.get("metadata") or {}).get("creationTimestamp"),
        text=f"{kind.value} {ctx.namespace}/{ctx.target.name} {state} active={fields['active']} "
             f"failed={fields['failed']} succeeded={fields['succeeded']}".replace("  ", " ")))
    for item, raw in zip(conditions, status.get("conditions") or [], strict=False):
        sink.observe(observation(
            kind="workload_condition", subject=ctx.subject, command=command, fields=item,
            observed_at=raw.get("lastTransitionTime"),
            text=f"{item['type']}={item['status']} {item.get('reason') or ''}: {item.get('message') or ''}".strip()))


def is_suspended(workload: dict[str, Any]) -> bool:
    """Jobs and JobSets say `spec.suspend`; Kubeflow jobs say `spec.runPolicy.suspend`."""
    spec = workload.get("spec") or {}
    return bool(spec.get("suspend") or (spec.get("runPolicy") or {}).get("suspend"))


def pod_selector(ctx: KubeContext) -> list[str]:
    """Label selectors that find the workload's pods, most specific first."""
    name = ctx.target.name
    if ctx.kind in CUSTOM_KINDS:
        return [f"{CUSTOM_KINDS[ctx.kind].pod_label}={name}"]
    return [f"batch.kubernetes.io/job-name={name}", f"job-name={name}"]
