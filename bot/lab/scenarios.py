"""Simulated clusters: a busy healthy cluster, one failing workload, and an unrelated failure that must not be blamed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from bot.lab import objects as o
from bot.lab.kube_api import CRD_TYPES, ClusterState

TRAIN_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
HEALTHY_NCCL_ENV = {"NCCL_IB_HCA": "mlx5_0,mlx5_1,mlx5_2,mlx5_3", "NCCL_DEBUG": "INFO",
                    "NCCL_SOCKET_IFNAME": "eth0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scenario:
    """One simulated incident: the cluster, the failing target, a healthy sibling and what should be found."""

    name: str
    description: str
    target: str
    healthy_target: str
    expected_layer: str | None
    state: ClusterState
    unrelated: str = "pod/web/cache-warmer-7d9f (CrashLoopBackOff, not part of the target)"


@dataclasses.dataclass(kw_only=True)
class _Builder:
    state: ClusterState
    nodes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.state.add(obj)
        if obj["kind"] == "Node":
            self.nodes[obj["metadata"]["name"]] = obj
        return obj

    def events(self, obj: dict[str, Any], items: list[tuple[str, str, str, int]], *, host: str = "",
               component: str = "kubelet", namespace: str | None = None) -> None:
        for serial, (kind, reason, message, count) in enumerate(items):
            self.add(o.event(namespace=namespace or obj["metadata"].get("namespace", "default"),
                             involved=o.involved(obj), reason=reason, message=message, kind=kind, count=count,
                             last=20 + serial * 7, first=900 + serial, component=component, host=host,
                             serial=serial))


def _gpu_node_name(index: int) -> str:
    return f"gpu-node-{index:02d}"


def _base(*, crd_groups: tuple[str, ...] = tuple(CRD_TYPES), gpu_taint: bool = False, xid_node: str = "",
          gpu_nodes: int = 12, cpu_nodes: int = 4) -> _Builder:
    """The busy healthy cluster: GPU and CPU nodes, healthy jobs and services, one unrelated crash loop."""
    b = _Builder(state=ClusterState(crd_groups=crd_groups))
    for ns in ("default", "kube-system", "ml", "serving", "perf", "web"):
        b.add(o.namespace(ns))
    for index in range(1, gpu_nodes + 1):
        name = _gpu_node_name(index)
        b.add(o.node(name=name, ip=f"10.0.1.{10 + index}", taints=[GPU_TAINT] if gpu_taint else [],
                     allocatable_gpus=7 if name == xid_node else None))
    for index in range(1, cpu_nodes + 1):
        b.add(o.node(name=f"cpu-node-{index:02d}", ip=f"10.0.2.{10 + index}", gpus=0))
    # Healthy serving deployment and web frontends keep the cluster busy.
    for index in range(3):
        b.add(o.pod(namespace="serving", name=f"llm-svc-6c8d9-{index}", node_name=_gpu_node_name(10 + index % 2),
                    containers=[o.container(name="triton", image="nvcr.io/nvidia/tritonserver:24.05-trtllm-python-py3",
                                            gpus=1)], labels={"app": "llm-svc"}, ip=f"10.244.10.{index + 2}"))
    for index in range(4):
        b.add(o.pod(namespace="web", name=f"frontend-5f7b-{index}", node_name=f"cpu-node-{index % 4 + 1:02d}",
                    containers=[o.container(name="web", image="nginx:1.27", memory="256Mi", cpu="250m")],
                    labels={"app": "frontend"}, ip=f"10.244.20.{index + 2}"))
    # The unrelated failure elsewhere: a crash-looping cache warmer in another namespace.
    warmer = b.add(o.pod(namespace="web", name="cache-warmer-7d9f", node_name="cpu-node-02",
                         containers=[o.container(name="warmer", image="redis:7.2", memory="1Gi", cpu="500m")],
                         labels={"app": "cache-warmer"}, states={"warmer": o.waiting("CrashLoopBackOff",
                                                                                       "back-off 5m0s")},
                         last_states={"warmer": o.terminated(reason="Error", exit_code=1)},
                         restarts={"warmer": 42}))
    b.events(warmer, [("Warning", "BackOff", ("Back-off restarting failed container warmer in pod "
                                              "cache-warmer-7d9f_web"), 180)], host="cpu-node-02")
    b.state.add_log(namespace="web", pod="cache-warmer-7d9f", container="warmer",
                    text="Error: connection to redis-primary:6379 refused\n", previous=True)
    # An unrelated node warning on a node the target does not use.
    b.events(b.nodes[_gpu_node_name(12)], [("Warning", "FreeDiskSpaceFailed",
                                            "failed to garbage collect required amount of images", 3)],
             host=_gpu_node_name(12), namespace="default")
    return b


def _owner_object(b: _Builder, *, kind: str, namespace: str, name: str, template: dict[str, Any], replicas: int,
                  labels: dict[str, str] | None, suspend: bool,
                  conditions: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The workload object itself: a batch Job, a Kubeflow PyTorchJob or a JobSet."""
    if kind == "job":
        return b.add(o.job(namespace=namespace, name=name, template=template, parallelism=replicas,
                           active=0 if suspend else replicas, suspend=suspend, labels=labels, conditions=conditions))
    if kind == "pytorchjob":
        specs = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
        if replicas > 1:
            specs["Worker"] = {"replicas": replicas - 1, "restartPolicy": "OnFailure", "template": template}
        return b.add({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                      "metadata": o.meta(name=name, namespace=namespace, labels=labels, kind="PyTorchJob"),
                      "spec": {"pytorchReplicaSpecs": specs, "runPolicy": {"suspend": suspend}},
                      "status": {"conditions": list(conditions or []), "replicaStatuses": {
                          "Master": {"active": 1}, "Worker": {"active": replicas - 1}}}})
    return b.add({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                  "metadata": o.meta(name=name, namespace=namespace, labels=labels, kind="JobSet"),
                  "spec": {"suspend": suspend, "replicatedJobs": [
                      {"name": "trainer", "replicas": replicas, "template": {"spec": {"template": template}}}]},
                  "status": {"conditions": list(conditions or []), "replicatedJobsStatus": [
                      {"name": "trainer", "active": replicas, "ready": 0, "failed": 0, "succeeded": 0,
                       "suspended": 0}]}})


def _member(b: _Builder, *, kind: str, owner: dict[str, Any], index: int, template: dict[str, Any],
            replicas: int) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Pod name, labels and owner reference for member `index`, as each controller names them."""
    name, namespace = owner["metadata"]["name"], owner["metadata"]["namespace"]
    if kind == "job":
        return (f"{name}-{index}-x{index}k2p",
                {"batch.kubernetes.io/job-name": name, "job-name": name,
                 "batch.kubernetes.io/controller-uid": owner["metadata"]["uid"],
                 "batch.kubernetes.io/job-completion-index": str(index)}, o.owner_ref(owner))
    if kind == "pytorchjob":
        role, role_index = ("master", 0) if index == 0 else ("worker", index - 1)
        return (f"{name}-{role}-{role_index}",
                {"training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": role,
                 "training.kubeflow.org/replica-index": str(role_index),
                 "training.kubeflow.org/job-role": "master" if role == "master" else ""}, o.owner_ref(owner))
    child = b.add(o.job(namespace=namespace, name=f"{name}-trainer-{index}", template=template, parallelism=1,
                        active=1, labels={"jobset.sigs.k8s.io/jobset-name": name}))
    child["metadata"]["ownerReferences"] = [{**o.owner_ref(owner), "controller": True}]
    return (f"{name}-trainer-{index}-0-x{index}k2p",
            {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "trainer",
             "jobset.sigs.k8s.io/job-index": str(index), "batch.kubernetes.io/job-name": child["metadata"]["name"]},
            o.owner_ref(child))


def _training_job(b: _Builder, *, name: str, nodes: list[str | None], states: dict[int, dict[str, Any]] | None = None,
                  last_states: dict[int, dict[str, Any]] | None = None, restarts: dict[int, int] | None = None,
                  scheduled: tuple[bool, str, str] = (True, "", ""), phase: str = "Running",
                  env: dict[str, str] | None = None, labels: dict[str, str] | None = None, suspend: bool = False,
                  conditions: list[dict[str, Any]] | None = None, memory: str = "512Gi",
                  namespace: str = "ml", kind: str = "job") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    spec = o.container(name="trainer", image=TRAIN_IMAGE, gpus=8, memory=memory, cpu="96",
                       env={**HEALTHY_NCCL_ENV, **(env or {})})
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [spec], "restartPolicy": "OnFailure",
                                                               "tolerations": [GPU_TOLERATION]}}
    job = _owner_object(b, kind=kind, namespace=namespace, name=name, template=template, replicas=len(nodes),
                        labels=labels, suspend=suspend, conditions=conditions)
    pods = []
    if suspend:
        return job, pods
    for index, node_name in enumerate(nodes):
        pod_name, pod_labels, owner = _member(b, kind=kind, owner=job, index=index, template=template,
                                              replicas=len(nodes))
        pods.append(b.add(o.pod(
            namespace=namespace, name=pod_name, node_name=node_name, containers=[spec], labels=pod_labels,
            owner=owner, phase=phase if node_name else "Pending",
            states={"trainer": (states or {}).get(index, o.running())},
            last_states={"trainer": (last_states or {}).get(index, {})},
            restarts={"trainer": (restarts or {}).get(index, 0)},
            scheduled=scheduled if node_name is None else (True, "", ""),
            ip=f"10.244.30.{index + 2 + 40 * (name != 'train-llm')}", tolerations=[GPU_TOLERATION])))
    return job, pods


def _healthy_sibling(b: _Builder) -> None:
    _, pods = _training_job(b, name="train-llm-ok", nodes=[_gpu_node_name(1), _gpu_node_name(2)])
    for pod in pods:
        b.events(pod, [("Normal", "Started", "Started container trainer", 1)],
                 host=pod["spec"]["nodeName"])
        b.state.add_log(namespace="ml", pod=pod["metadata"]["name"], container="trainer",
                        text="step 1200 loss 1.83 throughput 412 samples/s\n")


def _scheduling_events(b: _Builder, pods: list[dict[str, Any]], message: str) -> None:
    for pod in pods:
        b.events(pod, [("Warning", "FailedScheduling", message, 37)], component="default-scheduler")


def pending_gpu_capacity() -> Scenario:
    """GPU job pending: every GPU node is full (capacity, not policy)."""
    b = _base()
    message = ("0/16 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, "
               "12 Insufficient nvidia.com/gpu. preemption: 0/16 nodes are available: "
               "12 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.")
    _, pods = _training_job(b, name="train-llm", nodes=[None, None], phase="Pending",
                            scheduled=(False, "Unschedulable", message))
    _scheduling_events(b, pods, message)
    _healthy_sibling(b)
    return Scenario(name="pending-gpu-capacity", description=pending_gpu_capacity.__doc__ or "",
                    target="ml/train-llm", healthy_target="ml/train-llm-ok", expected_layer="scheduler",
                    state=b.state)


def pending_gpu_taint() -> Scenario:
    """GPU job pending: GPU nodes are tainted and the pod has no toleration (policy, not capacity)."""
    b = _base(gpu_taint=True)
    message = ("0/16 nodes are available: 12 node(s) had untolerated taint {nvidia.com/gpu: present}, "
               "4 node(s) didn't match Pod's node affinity/selector. preemption: 0/16 nodes are available: "
               "16 Preemption is not helpful for scheduling.")
    _, pods = _training_job(b, name="train-llm", nodes=[None, None], phase="Pending",
                            scheduled=(False, "Unschedulable", message))
    for pod in pods:
        pod["spec"]["tolerations"] = []
    _scheduling_events(b, pods, message)
    _healthy_sibling(b)
    return Scenario(name="pending-gpu-taint", description=pending_gpu_taint.__doc__ or "", target="ml/train-llm",
                    healthy_target="ml/train-llm-ok", expected_layer="scheduler", state=b.state)


def crashloop() -> Scenario:
    """Training container crash-loops on a Python error after start."""
    b = _base()
    _, pods = _training_job(b, name="train-llm", nodes=[_gpu_node_name(3), _gpu_node_name(4)],
                            states={0: o.waiting("CrashLoopBackOff", 'back-off 5m0s restarting failed container='
                                                 'trainer pod=train-llm-0-x0k2p_ml')},
                            last_states={0: o.terminated(reason="Error", exit_code=1)}, restarts={0: 7})
    b.events(pods[0], [("Warning", "BackOff", ("Back-off restarting failed container trainer in pod "
                                              "train-llm-0-x0k2p_ml"), 31),
                       ("Normal", "Pulled", f'Container image "{TRAIN_IMAGE}" already present on machine', 8)],
             host=_gpu_node_name(3))
    traceback = "".join(f"step {i} loading shard {i}\n" for i in range(300)) + (
        "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 12, in <module>\n"
        "    from flash_attn import flash_attn_func\nModuleNotFoundError: No module named 'flash_attn'\n")
    b.state.add_log(namespace="ml", pod=pods[0]["metadata"]["name"], container="trainer", text=traceback,
                    previous=True)
    b.state.add_log(namespace="ml", pod=pods[0]["metadata"]["name"], container="trainer", text="starting\n")
    _healthy_sibling(b)
    return Scenario(name="crashloop", description=crashloop.__doc__ or "", target="ml/train-llm",
                    healthy_target="ml/train-llm-ok", expected_layer="runtime", state=b.state)


def oom() -> Scenario:
    """Training container is OOM-killed (exit 137) and restarts."""
    b = _base()
    _, pods = _training_job(b, name="train-llm", nodes=[_gpu_node_name(3)], memory="64Gi",
                            states={0: o.waiting("CrashLoopBackOff", "back-off 2m40s")},
                            last_states={0: o.terminated(reason="OOMKilled", exit_code=137)}, restarts={0: 4})
    b.events(pods[0], [("Warning", "BackOff", ("Back-off restarting failed container trainer in pod "
                                              "train-llm-0-x0k2p_ml"), 12)], host=_gpu_node_name(3))
    b.state.add_log(namespace="ml", pod=pods[0]["metadata"]["name"], container="trainer", previous=True,
                    text="loading dataset into memory\nallocating pinned buffers 48.0 GiB\n")
    _healthy_sibling(b)
    return Scenario(name="oom", description=oom.__doc__ or "", target="ml/train-llm",
                    healthy_target="ml/train-llm-ok", expected_layer="runtime", state=b.state)


def trt_engine() -> Scenario:
    """TensorRT engine conversion artifact does not match the runtime: the serving build job fails."""
    b = _base()
    spec = o.container(name="engine-build", image="nvcr.io/nvidia/tritonserver:24.05-trtllm-python-py3", gpus=1,
                       env={"CUDA_VISIBLE_DEVICES": "0", "TRTLLM_ENGINE_DIR": "/models/llama-70b/1"})
    template = {"metadata": {}, "spec": {"containers": [spec], "restartPolicy": "Never"}}
    job = b.add(o.job(namespace="serving", name="llm-engine-build", template=template, failed=1,
                      conditions=[o.condition(kind="Failed", status=True, reason="BackoffLimitExceeded",
                                              message="Job has reached the specified backoff limit")]))
    pod = b.add(o.pod(namespace="serving", name="llm-engine-build-0-q8z2", node_name=_gpu_node_name(6),
                      containers=[spec], labels={"job-name": "llm-engine-build",
                                                 "batch.kubernetes.io/job-name": "llm-engine-build"},
                      owner=o.owner_ref(job), phase="Failed",
                      states={"engine-build": o.terminated(reason="Error", exit_code=1, ago=200)}))
    log = ("[TensorRT-LLM] TensorRT-LLM version: 0.10.0\n"
           "[TRT] [E] 1: [stdArchiveReader.cpp::StdArchiveReader::42] Error Code 1: Serialization "
           "(Serialization assertion stdVersionRead == kSERIALIZATION_VERSION failed.Version tag does not match. "
           "Note: Current Version: 236, Serialized Engine Version: 232)\n"
           "[TRT] [E] 4: [runtime.cpp::deserializeCudaEngine::65] Error Code 4: Internal Error "
           "(Engine deserialization failed.)\n"
           "RuntimeError: Failed to deserialize engine /models/llama-70b/1/rank0.engine: built with TensorRT "
           "9.3.0, runtime is TensorRT 10.0.1\n")
    b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="engine-build", text=log)
    b.events(job, [("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit", 1)],
             component="job-controller")
    ok_job = b.add(o.job(namespace="serving", name="llm-engine-build-ok", template=template, succeeded=1,
                         conditions=[o.condition(kind="Complete", status=True, reason="", message="")]))
    b.add(o.pod(namespace="serving", name="llm-engine-build-ok-0-a1b2", node_name=_gpu_node_name(7),
                containers=[spec], labels={"job-name": "llm-engine-build-ok"}, owner=o.owner_ref(ok_job),
                phase="Succeeded", states={"engine-build": o.terminated(reason="Completed", exit_code=0)}))
    return Scenario(name="trt-engine", description=trt_engine.__doc__ or "", target="serving/llm-engine-build",
                    healthy_target="serving/llm-engine-build-ok", expected_layer="workflow", state=b.state)


def nccl_ib() -> Scenario:
    """A multi-node PyTorchJob dies on NCCL NET/IB errors between gpu-node-03 and gpu-node-07 (HCA mlx5_2)."""
    b = _base()
    nodes = [_gpu_node_name(3), _gpu_node_name(7)]
    _, pods = _training_job(b, name="train-llm", nodes=nodes, kind="pytorchjob",
                            states={0: o.waiting("CrashLoopBackOff", "back-off 1m20s"),
                                    1: o.waiting("CrashLoopBackOff", "back-off 1m20s")},
                            last_states={0: o.terminated(reason="Error", exit_code=1),
                                         1: o.terminated(reason="Error", exit_code=1)},
                            restarts={0: 3, 1: 3})
    ips = {nodes[0]: "10.0.1.13", nodes[1]: "10.0.1.17"}
    for index, pod in enumerate(pods):
        host, peer = nodes[index], nodes[1 - index]
        log = (f"{host}:48213:48290 [2] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
               f"[3]mlx5_3:1/IB ; OOB eth0:{ips[host]}<0>\n"
               f"{host}:48213:48290 [2] NCCL INFO Channel 02/0 : 3[2] -> 11[2] [send] via NET/IB/2\n"
               f"{host}:48213:48291 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
               f"{ips[peer]}<52431> ({peer}) with status=12 opcode=0 len=0 vendor err 129 (Send) localGid "
               f"::ffff:{ips[host]} remoteGids ::ffff:{ips[peer]} hca mlx5_2\n"
               f"{host}:48213:48291 [2] NCCL INFO transport/net.cc:1134 -> 6\n"
               f"{host}:48213:48213 [2] NCCL WARN NET/IB : mlx5_2:1 async event: port error on {host}, "
               f"peer {peer}\n"
               "RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: NCCL "
               "error: remote process exited or there was a network error, NCCL version 2.21.5\n")
        b.state.add_log(namespace="ml", pod=pod["metadata"]["name"], container="trainer", text=log, previous=True)
        b.state.add_log(namespace="ml", pod=pod["metadata"]["name"], container="trainer",
                        text=f"{host}:50001:50001 [0] NCCL INFO Bootstrap : Using eth0:{ips[host]}<0>\n")
        b.events(pod, [("Warning", "BackOff", (f"Back-off restarting failed container trainer in pod "
                                              f"{pod['metadata']['name']}_ml"), 9)], host=host)
    _healthy_sibling(b)
    return Scenario(name="nccl-ib", description=nccl_ib.__doc__ or "", target="ml/train-llm",
                    healthy_target="ml/train-llm-ok", expected_layer="fabric", state=b.state)


def gpu_xid() -> Scenario:
    """A JobSet's pod dies with a CUDA error on gpu-node-05, which reports GPU Xid 79 (fallen off the bus)."""
    node_name = _gpu_node_name(5)
    b = _base(xid_node=node_name)
    _, pods = _training_job(b, name="train-llm", nodes=[node_name, _gpu_node_name(6)], kind="jobset",
                            states={0: o.waiting("CrashLoopBackOff", "back-off 40s")},
                            last_states={0: o.terminated(reason="Error", exit_code=1)}, restarts={0: 2})
    b.events(b.nodes[node_name], [
        ("Warning", "XidError", ("NVRM: Xid (PCI:0000:9b:00): 79, pid=48213, name=python, GPU has fallen off the "
                                "bus."), 3),
        ("Warning", "GPUUnhealthy", ("nvidia.com/gpu GPU-5c1e0e5a-7b9c-4f5e-9d7e-1a2b3c4d5e6f marked unhealthy "
                                    "by device plugin"), 1)], host=node_name, component="gpu-health-monitor",
        namespace="default")
    b.state.add_log(namespace="ml", pod=pods[0]["metadata"]["name"], container="trainer", previous=True,
                    text="step 812 loss 2.01\nRuntimeError: CUDA error: unspecified launch failure\n"
                         "CUDA kernel errors might be asynchronously reported at some other API call\n")
    _healthy_sibling(b)
    return Scenario(name="gpu-xid", description=gpu_xid.__doc__ or "", target="ml/train-llm",
                    healthy_target="ml/train-llm-ok", expected_layer="runtime", state=b.state)


def _kueue_objects(b: _Builder, *, job: dict[str, Any], admitted: bool, message: str) -> None:
    namespace, queue = job["metadata"]["namespace"], job["metadata"]["labels"].get(QUEUE_LABEL, "team-ml")
    b.add({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
           "metadata": o.meta(name="gpu-cluster-queue", kind="ClusterQueue"),
           "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
               {"name": "h100-80gb", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 32}]}]}]},
           "status": {"admittedWorkloads": 2, "pendingWorkloads": 1, "flavorsUsage": [
               {"name": "h100-80gb", "resources": [{"name": "nvidia.com/gpu", "total": 32}]}]}})
    b.add({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
           "metadata": o.meta(name=queue, namespace=namespace, kind="LocalQueue"),
           "spec": {"clusterQueue": "gpu-cluster-queue"}, "status": {"pendingWorkloads": 1}})
    name = job["metadata"]["name"]
    b.add({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
           "metadata": o.meta(name=f"{job['kind'].lower()}-{name}-7c1d2", namespace=namespace,
                              owner=o.owner_ref(job), kind="Workload",
                              labels={"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]}),
           "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 2}]},
           "status": {"conditions": [
               o.condition(kind="QuotaReserved", status=admitted, reason="Pending" if not admitted else "QuotaReserved",
                           message=message, ago=1800),
               o.condition(kind="Admitted", status=admitted, reason="NoReservation" if not admitted else "Admitted",
                           message="The workload has no reservation" if not admitted else "", ago=1800)]}})


def kueue_quota() -> Scenario:
    """A queued GPU job is never admitted: Kueue's ClusterQueue quota for nvidia.com/gpu is used up."""
    b = _base()
    labels = {"kueue.x-k8s.io/queue-name": "team-ml"}
    job, _ = _training_job(b, name="train-llm", nodes=[None, None], suspend=True, labels=labels,
                           conditions=[o.condition(kind="Suspended", status=True, reason="JobSuspended",
                                                   message="Job suspended", ago=1800)])
    _kueue_objects(b, job=job, admitted=False,
                   message="couldn't assign flavors to pod set main: insufficient unused quota for "
                           "nvidia.com/gpu in flavor h100-80gb, 16 more needed")
    b.events(job, [("Normal", "Suspended", "Job suspended", 1)], component="job-controller")
    _healthy_sibling(b)
    return Scenario(name="kueue-quota", description=kueue_quota.__doc__ or "", target="ml/train-llm",
                    healthy_target="ml/train-llm-ok", expected_layer="scheduler", state=b.state)


def kueue_not_installed() -> Scenario:
    """A Job labelled for a Kueue queue stays suspended, and the cluster does not serve Kueue's API at all."""
    groups = tuple(group for group in CRD_TYPES if group != "kueue.x-k8s.io")
    b = _base(crd_groups=groups)
    _training_job(b, name="train-llm", nodes=[None, None], suspend=True,
                  labels={"kueue.x-k8s.io/queue-name": "team-ml"},
                  conditions=[o.condition(kind="Suspended", status=True, reason="JobSuspended",
                                          message="Job suspended", ago=1800)])
    _healthy_sibling(b)
    return Scenario(name="kueue-not-installed", description=kueue_not_installed.__doc__ or "",
                    target="ml/train-llm", healthy_target="ml/train-llm-ok", expected_layer="scheduler",
                    state=b.state)


def _aiperf(b: _Builder, *, name: str, phase: str, sub_phase: str = "", error: str = "",
            metrics: dict[str, Any] | None = None, worker_state: dict[str, Any] | None = None,
            restarts: int = 0, worker_log: str = "", previous_log: str = "", scheduled: tuple[bool, str, str] = (True, "", ""),
            last_state: dict[str, Any] | None = None, queue: str = "",
            with_pods: bool = True) -> dict[str, Any]:
    obj = b.add({
        "apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob",
        "metadata": o.meta(name=name, namespace="perf", kind="AIPerfJob",
                           labels={QUEUE_LABEL: queue} if queue else None),
        "spec": {"image": "nvcr.io/nvidia/aiperf:0.3.0", "benchmark": {
            "endpoint": {"url": "http://llm-svc.serving.svc:8000", "model": "llama-3-70b"}, "concurrency": 256},
            "timeoutSeconds": 3600, "resourceMode": "burstable"},
        "status": {"phase": phase, "subPhase": sub_phase, "error": error, "workers": {"ready": 4, "total": 4},
                   "liveMetrics": {"metrics": metrics or {}},
                   "conditions": [o.condition(kind="Ready", status=phase in ("Running", "Completed"),
                                              reason=phase, message=error or phase)]},
    })
    labels = {"aiperf.nvidia.com/job-id": name, "app.kubernetes.io/managed-by": "aiperf-operator"}
    for index, role in enumerate(("control-plane", "worker") if with_pods else ()):
        spec = o.container(name=role, image="nvcr.io/nvidia/aiperf:0.3.0", memory="2Gi", cpu="150m", limits=False,
                           env={"AIPERF_K8S_WORKER_POD_MEMORY": "2Gi"})
        pod = b.add(o.pod(namespace="perf", name=f"{name}-{role}-0", node_name=None if not scheduled[0]
                          else f"cpu-node-{index + 1:02d}", containers=[spec], labels=labels,
                          owner=o.owner_ref(obj), phase="Pending" if not scheduled[0] else "Running",
                          scheduled=scheduled, states={role: worker_state or o.running()} if role == "worker" else None,
                          restarts={role: restarts} if role == "worker" else None,
                          last_states={role: last_state} if role == "worker" and last_state else None))
        if worker_log and role == "worker":
            b.state.add_log(namespace="perf", pod=pod["metadata"]["name"], container=role, text=worker_log)
        if previous_log and role == "worker":
            b.state.add_log(namespace="perf", pod=pod["metadata"]["name"], container=role, text=previous_log,
                            previous=True)
        if not scheduled[0]:
            _scheduling_events(b, [pod], scheduled[2])
    return obj


def aiperf_endpoint() -> Scenario:
    """An AIPerf benchmark fails its endpoint health check: the serving route has no ready endpoints."""
    b = _base()
    _aiperf(b, name="bench-llm", phase="Failed",
            error="endpoint health check failed: GET http://llm-svc.serving.svc:8000/v1/models: connection refused",
            worker_log="Connection refused: llm-svc.serving.svc:8000\n")
    _aiperf(b, name="bench-llm-ok", phase="Running", sub_phase="Profiling",
            metrics={"request_error_rate": {"avg": 0.1}, "requests_completed": {"value": 18234}})
    b.add({"apiVersion": "v1", "kind": "Endpoints", "metadata": o.meta(name="llm-svc-canary", namespace="serving",
                                                                       kind="Endpoints"),
           "subsets": [{"notReadyAddresses": [{"ip": "10.244.10.9"}], "ports": [{"port": 8000, "name": "http"}]}]})
    return Scenario(name="aiperf-endpoint", description=aiperf_endpoint.__doc__ or "", target="aiperfjob/perf/bench-llm",
                    healthy_target="aiperfjob/perf/bench-llm-ok", expected_layer="workflow", state=b.state)


def aiperf_error_rate() -> Scenario:
    """An AIPerf benchmark runs but the endpoint rejects requests: request_error_rate.avg is 12.5 (percent)."""
    b = _base()
    _aiperf(b, name="bench-llm", phase="Running", sub_phase="Profiling",
            metrics={"request_error_rate": {"avg": 12.5}, "requests_completed": {"value": 4410}},
            worker_log="HTTP 503 Service Unavailable from http://llm-svc.serving.svc:8000/v1/chat/completions\n" * 5)
    _aiperf(b, name="bench-llm-ok", phase="Running", sub_phase="Profiling",
            metrics={"request_error_rate": {"avg": 0.1}, "requests_completed": {"value": 18234}})
    return Scenario(name="aiperf-error-rate", description=aiperf_error_rate.__doc__ or "",
                    target="aiperfjob/perf/bench-llm", healthy_target="aiperfjob/perf/bench-llm-ok",
                    expected_layer="workflow", state=b.state)


def aiperf_pending() -> Scenario:
    """An AIPerf benchmark stays Pending: its pods do not tolerate the nodes' taint."""
    b = _base()
    message = ("0/16 nodes are available: 16 node(s) had untolerated taint {dedicated: benchmark}. preemption: "
               "0/16 nodes are available: 16 Preemption is not helpful for scheduling.")
    _aiperf(b, name="bench-llm", phase="Pending", scheduled=(False, "Unschedulable", message))
    _aiperf(b, name="bench-llm-ok", phase="Completed", sub_phase="Done")
    return Scenario(name="aiperf-pending", description=aiperf_pending.__doc__ or "", target="aiperfjob/perf/bench-llm",
                    healthy_target="aiperfjob/perf/bench-llm-ok", expected_layer="scheduler", state=b.state)


def aiperf_queued() -> Scenario:
    """An AIPerf benchmark stays Queued: Kueue has not admitted it (GPU quota of the cluster queue used up)."""
    b = _base()
    job = _aiperf(b, name="bench-llm", phase="Queued", queue="perf-queue", with_pods=False)
    _kueue_objects(b, job=job, admitted=False,
                   message="couldn't assign flavors to pod set workers: insufficient unused quota for cpu in "
                           "flavor default, 12 more needed")
    _aiperf(b, name="bench-llm-ok", phase="Completed", sub_phase="Done")
    return Scenario(name="aiperf-queued", description=aiperf_queued.__doc__ or "", target="aiperfjob/perf/bench-llm",
                    healthy_target="aiperfjob/perf/bench-llm-ok", expected_layer="scheduler", state=b.state)


def aiperf_crashloop() -> Scenario:
    """An AIPerf worker restarts over and over while the job says Running (restarts > 3): read its logs."""
    b = _base()
    _aiperf(b, name="bench-llm", phase="Running", sub_phase="Warmup", restarts=9,
            worker_state=o.waiting("CrashLoopBackOff", "back-off 5m0s"),
            last_state=o.terminated(reason="Error", exit_code=1),
            worker_log="starting worker\n",
            previous_log="Traceback (most recent call last):\n  File \"/app/aiperf/worker.py\", line 88, in run\n"
                       "KeyError: 'AIPERF_SERVICE_ID'\n")
    _aiperf(b, name="bench-llm-ok", phase="Running", sub_phase="Profiling",
            metrics={"request_error_rate": {"avg": 0.1}, "requests_completed": {"value": 18234}})
    return Scenario(name="aiperf-crashloop", description=aiperf_crashloop.__doc__ or "",
                    target="aiperfjob/perf/bench-llm", healthy_target="aiperfjob/perf/bench-llm-ok",
                    expected_layer="runtime", state=b.state)


def healthy() -> Scenario:
    """The busy cluster with nothing wrong with the target (the unrelated crash loop is still there)."""
    b = _base()
    _healthy_sibling(b)
    return Scenario(name="healthy", description=healthy.__doc__ or "", target="ml/train-llm-ok",
                    healthy_target="ml/train-llm-ok", expected_layer=None, state=b.state)


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "pending-gpu-capacity": pending_gpu_capacity,
    "pending-gpu-taint": pending_gpu_taint,
    "crashloop": crashloop,
    "oom": oom,
    "trt-engine": trt_engine,
    "nccl-ib": nccl_ib,
    "gpu-xid": gpu_xid,
    "kueue-quota": kueue_quota,
    "kueue-not-installed": kueue_not_installed,
    "aiperf-endpoint": aiperf_endpoint,
    "aiperf-error-rate": aiperf_error_rate,
    "aiperf-pending": aiperf_pending,
    "aiperf-queued": aiperf_queued,
    "aiperf-crashloop": aiperf_crashloop,
    "healthy": healthy,
}


class UnknownScenario(KeyError):
    """The scenario name is not one the lab knows."""


def build(name: str) -> Scenario:
    """Build one scenario by name."""
    from bot.lab.node_scenarios import NODE_SCENARIOS  # node triage scenarios live beside these

    factory = SCENARIOS.get(name) or NODE_SCENARIOS.get(name)
    if factory is None:
        raise UnknownScenario(f"unknown scenario {name!r}; known: {', '.join([*SCENARIOS, *NODE_SCENARIOS])}")
    return factory()
