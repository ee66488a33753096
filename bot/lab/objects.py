"""Builders for lab objects that carry every field a real API server fills (the client validates strictly)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

NOW = datetime.now(UTC).replace(microsecond=0)


def ts(seconds_ago: float) -> str:
    """RFC 3339 timestamp `seconds_ago` before the lab's clock."""
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def uid(*parts: str) -> str:
    """A stable UID from the object's identity."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def digest(image: str) -> str:
    """A stable fake sha256 digest for an image reference."""
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def meta(*, name: str, namespace: str | None = None, labels: dict[str, str] | None = None, age: float = 3600,
         owner: dict[str, Any] | None = None, kind: str = "") -> dict[str, Any]:
    """ObjectMeta with uid, creationTimestamp, labels and optional owner reference."""
    data: dict[str, Any] = {"name": name, "uid": uid(kind, namespace or "", name), "creationTimestamp": ts(age),
                            "labels": dict(labels or {})}
    if namespace is not None:
        data["namespace"] = namespace
    if owner is not None:
        data["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
    return data


def owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    """An owner reference pointing at `obj`."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"]}


def node(*, name: str, ip: str, gpus: int = 8, gpu_product: str = "NVIDIA-H100-80GB-HBM3",
         allocatable_gpus: int | None = None, taints: list[dict[str, str]] | None = None, ready: bool = True,
         memory_pressure: bool = False, driver: str = "550.90.07", cuda: str = "12.4",
         extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Node with full nodeInfo, conditions, addresses, capacity/allocatable and GPU feature labels."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "gpu-8x" if gpus else "cpu-64"}
    if gpus:
        labels.update({"nvidia.com/gpu.product": gpu_product, "nvidia.com/gpu.count": str(gpus),
                       "nvidia.com/cuda.driver.major": driver.split(".")[0],
                       "nvidia.com/cuda.driver-version.full": driver, "nvidia.com/cuda.runtime-version.full": cuda,
                       "nvidia.com/gpu.present": "true"})
    labels.update(extra_labels or {})
    capacity = {"cpu": "128", "memory": "2113412Mi", "pods": "110", "ephemeral-storage": "3748442Mi"}
    allocatable = {"cpu": "127500m", "memory": "2100000Mi", "pods": "110", "ephemeral-storage": "3454602Mi"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
        allocatable["nvidia.com/gpu"] = str(gpus if allocatable_gpus is None else allocatable_gpus)
    heartbeat = ts(20)

    def condition(kind: str, status: bool, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": "True" if status else "False", "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": ts(86400), "reason": reason, "message": message}

    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": meta(name=name, labels=labels, age=86400 * 30, kind="Node"),
        "spec": {"podCIDR": "10.244.0.0/24", "providerID": f"lab://{name}", "taints": list(taints or [])},
        "status": {
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [
                condition("MemoryPressure", memory_pressure,
                          "KubeletHasInsufficientMemory" if memory_pressure else "KubeletHasSufficientMemory",
                          "kubelet has insufficient memory available" if memory_pressure
                          else "kubelet has sufficient memory available"),
                condition("DiskPressure", False, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", False, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", ready, "KubeletReady" if ready else "KubeletNotReady",
                          "kubelet is posting ready status" if ready else "container runtime is down"),
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": uid("machine", name).replace("-", ""), "systemUUID": uid("system", name),
                "bootID": uid("boot", name), "kernelVersion": "5.15.0-119-generic",
                "osImage": "Ubuntu 22.04.4 LTS", "containerRuntimeVersion": "containerd://1.7.18",
                "kubeletVersion": "v1.30.4", "kubeProxyVersion": "v1.30.4", "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [],
        },
    }


def container(*, name: str, image: str, gpus: int = 0, memory: str = "64Gi", cpu: str = "8",
              env: dict[str, str] | None = None, limits: bool = True) -> dict[str, Any]:
    """A container spec with resources and env."""
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = dict(requests)
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": resources,
            "env": [{"name": key, "value": value} for key, value in (env or {}).items()],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}


def running(*, since: float = 3000) -> dict[str, Any]:
    """State: running."""
    return {"running": {"startedAt": ts(since)}}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    """State: waiting (CrashLoopBackOff, ImagePullBackOff, ContainerCreating)."""
    return {"waiting": {"reason": reason, "message": message}}


def terminated(*, reason: str, exit_code: int, ago: float = 120, message: str = "") -> dict[str, Any]:
    """State: terminated with a reason and exit code."""
    data = {"reason": reason, "exitCode": exit_code, "startedAt": ts(ago + 300), "finishedAt": ts(ago),
            "containerID": "containerd://" + uid("c", str(ago), reason).replace("-", "")}
    if message:
        data["message"] = message
    return {"terminated": data}


# Waiting reasons of a container whose image is not on the node yet (the kubelet reports no imageID then).
_NOT_PULLED = {"ErrImagePull", "ImagePullBackOff", "ContainerCreating", "PodInitializing", "InvalidImageName"}


def _statuses(*, namespace: str, name: str, containers: list[dict[str, Any]], states: dict[str, dict[str, Any]],
              last_states: dict[str, dict[str, Any]] | None, restarts: dict[str, int] | None, phase: str,
              default: dict[str, Any]) -> list[dict[str, Any]]:
    statuses = []
    for spec in containers:
        state = states.get(spec["name"], default)
        statuses.append({
            "name": spec["name"], "image": spec["image"],
            "imageID": "" if (state.get("waiting") or {}).get("reason") in _NOT_PULLED and not (last_states or {}).get(
                spec["name"]) else f"{spec['image'].split(':')[0]}@{digest(spec['image'])}",
            "ready": "running" in state and phase == "Running", "started": "running" in state,
            "restartCount": (restarts or {}).get(spec["name"], 0), "state": state,
            "lastState": (last_states or {}).get(spec["name"], {}),
            "containerID": "containerd://" + uid(namespace, name, spec["name"]).replace("-", ""),
        })
    return statuses


def pod(*, namespace: str, name: str, node_name: str | None, containers: list[dict[str, Any]],
        labels: dict[str, str] | None = None, owner: dict[str, Any] | None = None, phase: str = "Running",
        states: dict[str, dict[str, Any]] | None = None, last_states: dict[str, dict[str, Any]] | None = None,
        restarts: dict[str, int] | None = None, scheduled: tuple[bool, str, str] = (True, "", ""),
        ip: str = "", age: float = 3600, node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, str]] | None = None, init_containers: list[dict[str, Any]] | None = None,
        init_states: dict[str, dict[str, Any]] | None = None,
        init_last_states: dict[str, dict[str, Any]] | None = None, init_restarts: dict[str, int] | None = None,
        hostname: str = "", subdomain: str = "", nominated_node: str = "", ready_since: float = 60,
        restart_policy: str = "OnFailure", image_pull_secrets: list[str] | None = None) -> dict[str, Any]:
    """A Pod with status filled as the kubelet would: conditions, init and regular container statuses with imageID.

    Init containers default to completed; when one has not (its state says so) the regular containers wait in
    PodInitializing and the pod is Pending, as the kubelet reports it.
    """
    init_containers = list(init_containers or [])
    sidecars = {c["name"] for c in init_containers if c.get("restartPolicy") == "Always"}
    init_default = {"terminated": {"reason": "Completed", "exitCode": 0, "startedAt": ts(age - 5),
                                   "finishedAt": ts(age - 30), "containerID": "containerd://" + uid(name, "init")}}
    init_states = {**{c: running(since=age - 5) for c in sidecars}, **(init_states or {})}

    def init_done(container: str) -> bool:
        state = init_states.get(container, init_default)
        if container in sidecars:
            return "running" in state
        return (state.get("terminated") or {}).get("exitCode") == 0

    pending_init = [c["name"] for c in init_containers if not init_done(c["name"])]
    if pending_init and phase == "Running":
        phase = "Pending"
    init_statuses = _statuses(namespace=namespace, name=name, containers=init_containers, states=init_states,
                              last_states=init_last_states, restarts=init_restarts, phase="Running",
                              default=init_default)
    for item in init_statuses:  # init containers are never "ready" except running sidecars
        item["ready"] = item["name"] in sidecars and "running" in item["state"]
    statuses = _statuses(namespace=namespace, name=name, containers=containers, states=states or {},
                         last_states=last_states, restarts=restarts, phase=phase,
                         default=waiting("PodInitializing") if pending_init else running())
    is_scheduled, reason, message = scheduled
    conditions = [{"type": "PodScheduled", "status": "True" if is_scheduled else "False",
                   "lastTransitionTime": ts(age), "lastProbeTime": None,
                   **({"reason": reason, "message": message} if not is_scheduled else {})}]
    if is_scheduled:
        all_ready = all(s["ready"] for s in statuses)
        conditions += [
            {"type": "Initialized", "status": "False" if pending_init else "True",
             "lastTransitionTime": ts(age - 5), "lastProbeTime": None,
             **({} if not pending_init else {"reason": "ContainersNotInitialized",
                                      "message": f"containers with incomplete status: [{' '.join(pending_init)}]"})},
            {"type": "ContainersReady", "status": "True" if all_ready else "False",
             "lastTransitionTime": ts(ready_since), "lastProbeTime": None,
             **({} if all_ready else {"reason": "ContainersNotReady",
                                      "message": "containers with unready status: ["
                                                 + " ".join(s["name"] for s in statuses if not s["ready"]) + "]"})},
            {"type": "Ready", "status": "True" if all_ready else "False", "lastTransitionTime": ts(ready_since),
             "lastProbeTime": None},
        ]
    spec: dict[str, Any] = {"containers": containers, "restartPolicy": restart_policy,
                            "schedulerName": "default-scheduler",
                            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                            "dnsPolicy": "ClusterFirst", "tolerations": list(tolerations or []),
                            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"}
    if init_containers:
        spec["initContainers"] = init_containers
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    if image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": secret} for secret in image_pull_secrets]
    status: dict[str, Any] = {"phase": phase, "conditions": conditions, "qosClass": "Guaranteed"}
    if nominated_node:
        status["nominatedNodeName"] = nominated_node
    if is_scheduled:
        status.update({"hostIP": "10.0.0.1", "podIP": ip or "10.244.0.10", "podIPs": [{"ip": ip or "10.244.0.10"}],
                       "startTime": ts(age - 2), "containerStatuses": statuses})
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": meta(name=name, namespace=namespace, labels=labels, owner=owner, age=age, kind="Pod"),
            "spec": spec, "status": status}


def event(*, namespace: str, involved: dict[str, Any], reason: str, message: str, kind: str = "Normal",
          count: int = 1, last: float = 30, first: float | None = None, component: str = "kubelet",
          host: str = "", serial: int = 0) -> dict[str, Any]:
    """A core/v1 Event as the server stores it (with involvedObject, source, counts and timestamps)."""
    name = f"{involved['name']}.{hashlib.sha1(f'{reason}|{message}|{serial}'.encode()).hexdigest()[:12]}"
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, "uid": uid("ev", namespace, name),
                     "creationTimestamp": ts(first if first is not None else last)},
        "involvedObject": involved, "reason": reason, "message": message, "type": kind, "count": count,
        "firstTimestamp": ts(first if first is not None else last), "lastTimestamp": ts(last),
        "source": {"component": component, **({"host": host} if host else {})},
        "reportingComponent": component, "reportingInstance": host,
    }


def involved(obj: dict[str, Any], field_path: str = "") -> dict[str, Any]:
    """An involvedObject reference to `obj`."""
    ref = {"kind": obj["kind"], "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
           "apiVersion": obj["apiVersion"], "resourceVersion": ""}
    if obj["metadata"].get("namespace"):
        ref["namespace"] = obj["metadata"]["namespace"]
    if field_path:
        ref["fieldPath"] = field_path
    return ref


def namespace(name: str) -> dict[str, Any]:
    """A Namespace."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name=name, age=86400 * 60, kind="Namespace"),
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def job(*, namespace: str, name: str, template: dict[str, Any], parallelism: int = 1, active: int = 0,
        failed: int = 0, succeeded: int = 0, suspend: bool = False, labels: dict[str, str] | None = None,
        conditions: list[dict[str, Any]] | None = None, age: float = 3600) -> dict[str, Any]:
    """A batch/v1 Job with status counters and conditions."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": meta(name=name, namespace=namespace, labels=labels, age=age, kind="Job"),
        "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 6, "suspend": suspend,
                 "completionMode": "Indexed", "template": template},
        "status": {"active": active, "failed": failed, "succeeded": succeeded, "startTime": ts(age - 1),
                   "conditions": list(conditions or []), "ready": 0, "terminating": 0},
    }


def condition(*, kind: str, status: bool, reason: str, message: str, ago: float = 300) -> dict[str, Any]:
    """A generic status condition."""
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": ts(ago), "lastProbeTime": ts(ago)}


def _selector(labels: dict[str, str]) -> dict[str, Any]:
    return {"matchLabels": dict(labels)}


def deployment(*, namespace: str, name: str, template: dict[str, Any], replicas: int, ready: int,
               updated: int | None = None, conditions: list[dict[str, Any]] | None = None,
               labels: dict[str, str] | None = None, age: float = 86400, revision: int = 1) -> dict[str, Any]:
    """An apps/v1 Deployment with rollout status (replicas, ready, updated, unavailable) and conditions."""
    selector = template["metadata"]["labels"]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {**meta(name=name, namespace=namespace, labels=labels or selector, age=age, kind="Deployment"),
                     "annotations": {"deployment.kubernetes.io/revision": str(revision)}, "generation": revision},
        "spec": {"replicas": replicas, "selector": _selector(selector), "template": template,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                 "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
        "status": {"observedGeneration": revision, "replicas": replicas, "readyReplicas": ready,
                   "availableReplicas": ready, "updatedReplicas": replicas if updated is None else updated,
                   **({"unavailableReplicas": replicas - ready} if replicas > ready else {}),
                   "conditions": list(conditions or [])},
    }


def replicaset(*, owner: dict[str, Any], template_hash: str, revision: int, replicas: int, ready: int,
               image: str | None = None, age: float = 3600) -> dict[str, Any]:
    """The ReplicaSet a Deployment owns for one revision (pod-template-hash label, revision annotation)."""
    namespace, name = owner["metadata"]["namespace"], owner["metadata"]["name"]
    template = {**owner["spec"]["template"]}
    template["metadata"] = {"labels": {**template["metadata"]["labels"], "pod-template-hash": template_hash}}
    if image:
        spec = dict(template["spec"])
        spec["containers"] = [{**container, "image": image} for container in spec["containers"]]
        template["spec"] = spec
    rs_name = f"{name}-{template_hash}"
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {**meta(name=rs_name, namespace=namespace, labels=template["metadata"]["labels"], age=age,
                            owner=owner_ref(owner), kind="ReplicaSet"),
                     "annotations": {"deployment.kubernetes.io/revision": str(revision)}},
        "spec": {"replicas": replicas, "selector": _selector(template["metadata"]["labels"]), "template": template},
        "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                   "fullyLabeledReplicas": replicas, "observedGeneration": 1},
    }


def statefulset(*, namespace: str, name: str, template: dict[str, Any], replicas: int, ready: int,
                age: float = 86400) -> dict[str, Any]:
    """An apps/v1 StatefulSet with its governing service name and rollout status."""
    selector = template["metadata"]["labels"]
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": meta(name=name, namespace=namespace, labels=selector, age=age, kind="StatefulSet"),
        "spec": {"replicas": replicas, "selector": _selector(selector), "template": template, "serviceName": name,
                 "podManagementPolicy": "OrderedReady", "updateStrategy": {"type": "RollingUpdate"}},
        "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                   "currentReplicas": replicas, "updatedReplicas": replicas, "currentRevision": f"{name}-6d5f",
                   "updateRevision": f"{name}-6d5f", "observedGeneration": 1, "collisionCount": 0},
    }


def cronjob(*, namespace: str, name: str, job_template: dict[str, Any], schedule: str, last_schedule_ago: float,
            last_success_ago: float | None = None, active: list[dict[str, Any]] | None = None,
            age: float = 86400 * 30) -> dict[str, Any]:
    """A batch/v1 CronJob with its last schedule time, last success and active Job references."""
    status: dict[str, Any] = {"lastScheduleTime": ts(last_schedule_ago)}
    if last_success_ago is not None:
        status["lastSuccessfulTime"] = ts(last_success_ago)
    if active:
        status["active"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
                             "namespace": namespace, "uid": job["metadata"]["uid"]} for job in active]
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": meta(name=name, namespace=namespace, age=age, kind="CronJob"),
            "spec": {"schedule": schedule, "concurrencyPolicy": "Forbid", "suspend": False,
                     "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                     "jobTemplate": {"spec": job_template}},
            "status": status}


def custom(*, api_version: str, kind: str, namespace: str | None, name: str, spec: dict[str, Any],
           status: dict[str, Any], labels: dict[str, str] | None = None, age: float = 3600) -> dict[str, Any]:
    """Any custom resource (the server stores it as given)."""
    return {"apiVersion": api_version, "kind": kind,
            "metadata": meta(name=name, namespace=namespace, labels=labels, age=age, kind=kind),
            "spec": spec, "status": status}
