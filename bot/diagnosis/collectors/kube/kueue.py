"""Kueue: the Workload that admits (or holds) the target, its QuotaReserved/Admitted conditions."""

from __future__ import annotations

from typing import Any

from bot.diagnosis.collectors.kube.calls import GroupNotServed, observation
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.collectors.kube.workloads import QUEUE_LABEL, is_suspended
from bot.diagnosis.engine import Sink
from bot.evidence.findings import CollectorOutcome

GROUP, VERSION, PLURAL = "kueue.x-k8s.io", "v1beta1", "workloads"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


def collect_kueue(ctx: KubeContext, sink: Sink) -> None:
    """Find the target's Kueue Workload (by job-uid label, then by owner) and observe its admission."""
    workload = ctx.workload or {}
    meta = workload.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
    suspended = is_suspended(workload)
    if not queue and not suspended:
        sink.mark(CollectorOutcome.SKIPPED, "the workload has no Kueue queue label and is not suspended")
        return
    uid = meta.get("uid", "")
    command = f"kubectl get workloads.kueue.x-k8s.io -n {ctx.namespace} -l {JOB_UID_LABEL}={uid} -o yaml"
    try:
        path, where = f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}", {"namespace": ctx.namespace}
        found, _ = ctx.caller.list_all(path, path_params=where, query={"labelSelector": f"{JOB_UID_LABEL}={uid}"},
                                       what="list kueue workloads")
        if not found:
            candidates, truncated = ctx.caller.list_all(path, path_params=where, what="list kueue workloads")
            if truncated:
                sink.truncate("kueue workload list capped")
            found = [item for item in candidates if _owned_by(item, uid)]
            command = f"kubectl get workloads.kueue.x-k8s.io -n {ctx.namespace}"
    except GroupNotServed:
        sink.observe(observation(
            kind="api_group_missing", source="snapshot", subject=ctx.subject,
            text=f"the cluster does not serve {GROUP}: Kueue is not installed, yet the workload "
                 f"{'asks for queue ' + queue if queue else 'is suspended'}",
            command=f"kubectl api-resources --api-group={GROUP}",
            fields={"collector": "kueue", "group": GROUP, "status": 404, "queue_name": queue,
                    "suspended": suspended}))
        if queue and suspended:
            _missing(ctx, sink, queue=queue, suspended=suspended)
        sink.mark(CollectorOutcome.SKIPPED, f"{GROUP} is not served (404): Kueue not installed")
        return
    sink.count(len(found))
    if not found:
        if queue and suspended:
            _missing(ctx, sink, queue=queue, suspended=suspended)
        return
    for item in found:
        _observe(item, sink, command=command, queue=queue)


def _owned_by(item: dict[str, Any], uid: str) -> bool:
    return any(owner.get("uid") == uid for owner in (item.get("metadata") or {}).get("ownerReferences") or [])


def _missing(ctx: KubeContext, sink: Sink, *, queue: str, suspended: bool) -> None:
    sink.observe(observation(
        kind="kueue_workload_missing", source="kueue", subject=ctx.subject,
        text=f"{ctx.subject} is suspended with queue-name {queue} but Kueue has no Workload for it",
        command=f"kubectl get workloads.kueue.x-k8s.io -n {ctx.namespace}",
        fields={"queue_name": queue, "suspended": suspended}))


def _observe(item: dict[str, Any], sink: Sink, *, command: str, queue: str | None) -> None:
    meta, status = item.get("metadata") or {}, item.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    reserved, admitted = conditions.get("QuotaReserved") or {}, conditions.get("Admitted") or {}
    owner = next(iter(meta.get("ownerReferences") or []), {})
    fields = {
        "queue_name": (item.get("spec") or {}).get("queueName") or queue,
        "quota_reserved": reserved.get("status") == "True", "admitted": admitted.get("status") == "True",
        "reason": reserved.get("reason"), "message": reserved.get("message"),
        "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")} for c in conditions.values()],
        "owner": f"{owner.get('kind', '').lower()}/{owner.get('name', '')}" if owner else None,
    }
    state = "admitted" if fields["admitted"] else "not admitted"
    sink.observe(observation(
        kind="kueue_workload", source="kueue", subject=f"workload/{meta.get('namespace')}/{meta.get('name')}",
        command=command, fields=fields, observed_at=reserved.get("lastTransitionTime"),
        text=f"Kueue workload {meta.get('name')} {state} in queue {fields['queue_name']}: "
             f"{fields['message'] or fields['reason'] or ''}".strip()))
