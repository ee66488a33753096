"""Find the target workload (by its kind, or every kind in a fixed order) and observe its status and rollout.

Every read is one GET by name, or a namespace-scoped list narrowed by the workload's own selector (a
Deployment's ReplicaSets) or computed names (a CronJob's latest Jobs): never a cluster-wide sweep.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.diagnosis.collectors.kube import kinds
from bot.diagnosis.collectors.kube.calls import (
    ClusterUnreachable,
    GroupNotServed,
    ObjectNotFound,
    observation,
    parse_time,
)
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import Sink
from bot.evidence.findings import CollectorOutcome
from bot.evidence.targets import WorkloadKind

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REVISION = "deployment.kubernetes.io/revision"
MAX_CRON_JOBS = 3
CUSTOM_FORM = "plural.group/namespace/name"


def _read(ctx: KubeContext, spec: kinds.KindSpec) -> dict[str, Any]:
    """GET the target by name, trying the kind's versions in order; GroupNotServed when none is served."""
    where = {"namespace": ctx.namespace, "name": ctx.target.name}
    for version in spec.versions:
        try:
            found = ctx.caller.get(spec.collection(version) + "/{name}", path_params=where,
                                   what=f"get {spec.resource} {ctx.namespace}/{ctx.target.name}")
        except GroupNotServed:
            continue
        return found
    raise GroupNotServed(f"{spec.resource} is not served")


def resolve_workload(ctx: KubeContext, sink: Sink) -> None:
    """Look the target up by kind (or in the documented order) and record what was found."""
    if ctx.target.resource:
        _resolve_custom(ctx, sink)
        return
    order = (ctx.target.kind,) if ctx.target.kind else kinds.LOOKUP_ORDER
    tried: list[str] = []
    unserved: set[str] = set()
    for kind in order:
        spec = kinds.KINDS[kind]
        if spec.group and spec.group in unserved:
            continue
        tried.append(kind.value)
        try:
            workload = _read(ctx, spec)
        except ObjectNotFound:
            continue
        except GroupNotServed:
            unserved.add(spec.group)
            ctx.missing_groups.append(spec.group)
            if ctx.target.kind:
                sink.observe(observation(
                    kind="api_group_missing", source="snapshot", subject=ctx.subject,
                    text=f"the cluster does not serve {spec.group} (is the {spec.title} CRD installed?)",
                    command=f"kubectl api-resources --api-group={spec.group}",
                    fields={"collector": "workload", "group": spec.group, "status": 404}))
            continue
        except ClusterUnreachable as exc:
            ctx.unreachable = str(exc)
            raise
        _found(ctx, sink, workload=workload, spec=spec)
        return
    _not_found(ctx, sink, tried=tried)


def _found(ctx: KubeContext, sink: Sink, *, workload: dict[str, Any], spec: kinds.KindSpec) -> None:
    sink.count(1)
    ctx.workload, ctx.kind, ctx.spec = workload, spec.kind, spec
    uid = (workload.get("metadata") or {}).get("uid")
    if uid:
        ctx.owner_uids.add(uid)
    _observe_workload(ctx, sink)
    if spec.kind is WorkloadKind.DEPLOYMENT:
        _replica_sets(ctx, sink)
    elif spec.kind is WorkloadKind.CRONJOB:
        _cron_jobs(ctx, sink)
    elif spec.kind is WorkloadKind.POD:
        ctx.pods = [workload]


def _not_found(ctx: KubeContext, sink: Sink, *, tried: list[str]) -> None:
    shown = " / ".join(tried) if len(tried) <= 6 else f"{len(tried)} kinds ({', '.join(tried[:4])}, ...)"
    hint = "" if ctx.target.kind or ctx.target.resource else (
        f"; another kind (a custom resource) must be named in the id as `{CUSTOM_FORM}`")
    sink.observe(observation(
        kind="workload_not_found", source="kubernetes", subject=ctx.subject,
        text=f"no {shown} named {ctx.target.name} in namespace {ctx.namespace}{hint}",
        command=f"kubectl get {','.join(tried[:6]) or 'all'} -n {ctx.namespace} {ctx.target.name}",
        fields={"namespace": ctx.namespace, "name": ctx.target.name, "tried": tried}))
    sink.mark(CollectorOutcome.OK, f"not found as {', '.join(tried)}")


def _resolve_custom(ctx: KubeContext, sink: Sink) -> None:
    """A kind no table knows (`plural.group` in the id): discovery names its version, then one GET by name."""
    resource = ctx.target.resource or ""
    plural, _, group = resource.partition(".")
    try:
        discovered = ctx.caller.get(f"/apis/{group}", what=f"discover {group}")
        version = ((discovered or {}).get("preferredVersion") or {}).get("version") or ""
        listing = ctx.caller.get(f"/apis/{group}/{version}", what=f"discover {group}/{version}")
    except (GroupNotServed, ObjectNotFound):
        ctx.missing_groups.append(group)
        sink.observe(observation(
            kind="api_group_missing", source="snapshot", subject=ctx.subject,
            text=f"the cluster does not serve {group} (is the CRD for {resource} installed?)",
            command=f"kubectl api-resources --api-group={group}",
            fields={"collector": "workload", "group": group, "status": 404}))
        _not_found(ctx, sink, tried=[resource])
        return
    except ClusterUnreachable as exc:
        ctx.unreachable = str(exc)
        raise
    sink.count(2)
    entry = next((item for item in (listing or {}).get("resources") or []
                  if "/" not in item.get("name", "") and plural in
                  (item.get("name"), item.get("singularName"), str(item.get("kind", "")).lower())), None)
    if entry is None or not entry.get("namespaced", True):
        _not_found(ctx, sink, tried=[resource])
        return
    spec = kinds.custom(group=group, version=version, plural=entry["name"], title=str(entry.get("kind") or plural))
    try:
        workload = _read(ctx, spec)
    except (ObjectNotFound, GroupNotServed):
        _not_found(ctx, sink, tried=[spec.resource])
        return
    _found(ctx, sink, workload=workload, spec=spec)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def rollout(workload: dict[str, Any], kind: WorkloadKind | None) -> dict[str, Any]:
    """Desired vs ready replicas where the kind has them (Deployment, StatefulSet, ReplicaSet, DaemonSet, LWS)."""
    spec, status = workload.get("spec") or {}, workload.get("status") or {}
    if kind is WorkloadKind.DAEMONSET:
        desired = _count(status.get("desiredNumberScheduled"))
        return {"replicas": desired, "ready_replicas": _count(status.get("numberReady")) or 0,
                "available_replicas": _count(status.get("numberAvailable")) or 0,
                "updated_replicas": _count(status.get("updatedNumberScheduled")) or 0,
                "unavailable_replicas": _count(status.get("numberUnavailable")) or 0}
    if kind not in (WorkloadKind.DEPLOYMENT, WorkloadKind.STATEFULSET, WorkloadKind.REPLICASET,
                    WorkloadKind.LEADERWORKERSET):
        return {}
    desired = _count(spec.get("replicas"))
    ready = _count(status.get("readyReplicas")) or 0
    available = _count(status.get("availableReplicas"))
    unavailable = _count(status.get("unavailableReplicas"))
    if unavailable is None and desired is not None:
        unavailable = max(0, desired - (available if available is not None else ready))
    return {"replicas": 1 if desired is None else desired, "ready_replicas": ready,
            "available_replicas": available if available is not None else ready,
            "updated_replicas": _count(status.get("updatedReplicas")) or 0, "unavailable_replicas": unavailable or 0}


def phase_and_message(workload: dict[str, Any], kind: WorkloadKind | None) -> tuple[str, str, str]:
    """The kind's own state words: (phase, reason, message), empty where the kind has none."""
    status = workload.get("status") or {}
    if kind is WorkloadKind.RAYJOB:
        phase = status.get("jobDeploymentStatus") or ""
        job_status = status.get("jobStatus") or ""
        return (f"{phase} (job {job_status})" if job_status else phase), status.get("reason") or "", \
            status.get("message") or ""
    if kind is WorkloadKind.RAYCLUSTER:
        return status.get("state") or "", status.get("reason") or "", status.get("reason") or ""
    if kind is WorkloadKind.VOLCANOJOB:
        state = status.get("state") or {}
        return state.get("phase") or "", state.get("reason") or "", state.get("message") or ""
    if kind is WorkloadKind.INFERENCESERVICE:
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        failure = (status.get("modelStatus") or {}).get("lastFailureInfo") or {}
        phase = "Ready" if ready.get("status") == "True" else ("NotReady" if ready else "")
        return phase, failure.get("reason") or ready.get("reason") or "", \
            failure.get("message") or ready.get("message") or ""
    if kind is WorkloadKind.POD:
        return status.get("phase") or "", status.get("reason") or "", status.get("message") or ""
    return status.get("phase") or "", "", ""


def _observe_workload(ctx: KubeContext, sink: Sink) -> None:
    assert ctx.workload is not None
    workload, kind = ctx.workload, ctx.kind
    spec, status = workload.get("spec") or {}, workload.get("status") or {}
    meta = workload.get("metadata") or {}
    labels = meta.get("labels") or {}
    conditions = [{key: item.get(key) for key in ("type", "status", "reason", "message")}
                  for item in status.get("conditions") or []]
    command = f"kubectl get {ctx.kind_name} -n {ctx.namespace} {ctx.target.name} -o yaml"
    phase, reason, message = phase_and_message(workload, kind)
    owner = next((item for item in meta.get("ownerReferences") or [] if item.get("controller")), None)
    fields = {
        "kind": ctx.kind_name, "namespace": ctx.namespace, "name": ctx.target.name,
        "suspended": is_suspended(workload), "active": _active(status), "failed": status.get("failed"),
        "succeeded": status.get("succeeded"), "parallelism": spec.get("parallelism"),
        "queue_name": labels.get(QUEUE_LABEL), "conditions": conditions, "phase": phase or None,
        "reason": reason or None, "message": message or None,
        "owner": f"{owner.get('kind', '').lower()}/{owner.get('name', '')}" if owner else None,
        **rollout(workload, kind),
    }
    state = "suspended" if fields["suspended"] else phase
    counts = (f"ready {fields['ready_replicas']}/{fields['replicas']}, unavailable {fields['unavailable_replicas']}"
              if "replicas" in fields else
              f"active={fields['active']} failed={fields['failed']} succeeded={fields['succeeded']}")
    sink.observe(observation(
        kind="workload_status", subject=ctx.subject, command=command, fields=fields,
        observed_at=meta.get("creationTimestamp"),
        text=" ".join(filter(None, (f"{ctx.kind_name} {ctx.namespace}/{ctx.target.name}", state, counts,
                                    message and f"message: {message}")))))
    for item, raw in zip(conditions, status.get("conditions") or [], strict=False):
        sink.observe(observation(
            kind="workload_condition", subject=ctx.subject, command=command, fields=item,
            observed_at=raw.get("lastTransitionTime"),
            text=f"{item['type']}={item['status']} {item.get('reason') or ''}: {item.get('message') or ''}".strip()))


def _active(status: dict[str, Any]) -> Any:
    active = status.get("active")
    return len(active) if isinstance(active, list) else active  # a CronJob lists its active Jobs


def _replica_sets(ctx: KubeContext, sink: Sink) -> None:
    """A Deployment's ReplicaSets (its own selector, owner-checked): which revision is current and failing."""
    assert ctx.workload is not None
    selector = kinds.selector_text((ctx.workload.get("spec") or {}).get("selector"))
    if not selector:
        sink.note("the Deployment has no selector: its ReplicaSets cannot be listed")
        return
    items, truncated = ctx.caller.list_all("/apis/apps/v1/namespaces/{namespace}/replicasets",
                                           path_params={"namespace": ctx.namespace},
                                           query={"labelSelector": selector}, what=f"list replicasets -l {selector}",
                                           max_items=50)
    sink.count(len(items))
    if truncated:
        sink.truncate("replicaset list capped at 50")
    uid = (ctx.workload.get("metadata") or {}).get("uid")
    owned = [rs for rs in items if _owned_by(rs, {uid})]
    owned.sort(key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(REVISION) or 0), reverse=True)
    ctx.children = owned
    ctx.owner_uids.update(rs["metadata"]["uid"] for rs in owned)
    command = f"kubectl get replicasets -n {ctx.namespace} -l {selector} -o wide"
    for index, rs in enumerate(owned):
        facts = rollout({**rs, "kind": "ReplicaSet"}, WorkloadKind.REPLICASET)
        if index > 0 and not facts["replicas"]:
            continue  # old, scaled-down revisions are history the Deployment keeps
        revision = (rs["metadata"].get("annotations") or {}).get(REVISION)
        images = [c.get("image") for c in ((rs.get("spec") or {}).get("template") or {}).get("spec", {})
                  .get("containers") or []]
        failing = facts["ready_replicas"] < facts["replicas"]
        sink.observe(observation(
            kind="rollout_replicaset", subject=f"replicaset/{ctx.namespace}/{rs['metadata']['name']}",
            command=command, observed_at=rs["metadata"].get("creationTimestamp"),
            fields={"name": rs["metadata"]["name"], "revision": revision, "current": index == 0,
                    "failing": failing, "images": images, **facts},
            text=f"ReplicaSet {rs['metadata']['name']} (revision {revision}, {'current' if index == 0 else 'old'}) "
                 f"ready {facts['ready_replicas']}/{facts['replicas']}"))


def _owned_by(obj: dict[str, Any], uids: set[str | None]) -> bool:
    return any(owner.get("uid") in uids for owner in (obj.get("metadata") or {}).get("ownerReferences") or [])


def cron_job_name(*, cronjob: str, scheduled: datetime) -> str:
    """The Job name the CronJob controller gives one scheduled run: `<name>-<minutes since the epoch>`."""
    return f"{cronjob}-{int(scheduled.astimezone(UTC).timestamp()) // 60}"


def _cron_jobs(ctx: KubeContext, sink: Sink) -> None:
    """A CronJob's latest Jobs: the active ones and the last scheduled run, each one GET by name."""
    assert ctx.workload is not None
    status = ctx.workload.get("status") or {}
    names = [item.get("name") for item in status.get("active") or [] if item.get("name")]
    if status.get("lastScheduleTime"):
        names.append(cron_job_name(cronjob=ctx.target.name, scheduled=parse_time(status["lastScheduleTime"])))
    names = list(dict.fromkeys(names))[-MAX_CRON_JOBS:]
    uid = (ctx.workload.get("metadata") or {}).get("uid")
    spec = kinds.KINDS[WorkloadKind.JOB]
    jobs = []
    for name in names:
        try:
            job = ctx.caller.get(spec.collection("v1") + "/{name}", path_params={"namespace": ctx.namespace,
                                                                               "name": name},
                                 what=f"get job {ctx.namespace}/{name}")
        except ObjectNotFound:
            sink.note(f"job {name} of the last scheduled run is gone (history limit or TTL)")
            continue
        if _owned_by(job, {uid}):
            jobs.append(job)
    sink.count(len(jobs))
    jobs.sort(key=lambda job: job["metadata"].get("creationTimestamp") or "")
    ctx.children = jobs
    ctx.owner_uids.update(job["metadata"]["uid"] for job in jobs)
    if not jobs:
        sink.note("the CronJob has no active or last-scheduled Job to read")
    for index, job in enumerate(jobs):
        job_status = job.get("status") or {}
        name = job["metadata"]["name"]
        conditions = [{key: item.get(key) for key in ("type", "status", "reason", "message")}
                      for item in job_status.get("conditions") or []]
        latest = index == len(jobs) - 1
        command = f"kubectl get job -n {ctx.namespace} {name} -o yaml"
        sink.observe(observation(
            kind="workload_status", subject=f"job/{ctx.namespace}/{name}", command=command,
            observed_at=job["metadata"].get("creationTimestamp"),
            fields={"kind": "job", "namespace": ctx.namespace, "name": name, "suspended": is_suspended(job),
                    "active": job_status.get("active"), "failed": job_status.get("failed"),
                    "succeeded": job_status.get("succeeded"), "parallelism": (job.get("spec") or {}).get("parallelism"),
                    "queue_name": None, "conditions": conditions, "owner": f"cronjob/{ctx.target.name}",
                    "latest": latest},
            text=f"job {ctx.namespace}/{name} ({'latest' if latest else 'earlier'} run of cronjob "
                 f"{ctx.target.name}) active={job_status.get('active')} failed={job_status.get('failed')} "
                 f"succeeded={job_status.get('succeeded')}"))
        for item, raw in zip(conditions, job_status.get("conditions") or [], strict=False):
            sink.observe(observation(
                kind="workload_condition", subject=f"job/{ctx.namespace}/{name}", command=command, fields=item,
                observed_at=raw.get("lastTransitionTime"),
                text=f"{item['type']}={item['status']} {item.get('reason') or ''}: "
                     f"{item.get('message') or ''}".strip()))


def is_suspended(workload: dict[str, Any]) -> bool:
    """Jobs, JobSets and CronJobs say `spec.suspend`; Kubeflow jobs say `spec.runPolicy.suspend`."""
    spec = workload.get("spec") or {}
    return bool(spec.get("suspend") or (spec.get("runPolicy") or {}).get("suspend"))
