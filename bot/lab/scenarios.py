"""Simulated clusters: a busy healthy cluster, one failing workload, and an unrelated failure that must not be blamed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bot.lab import objects as o
from bot.lab.kube_api import CRD_TYPES, ClusterState

TRAIN_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GPU_OPERATOR = "gpu-operator"
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
               component: str = "kubelet", namespace: str | None = None, ago: float = 0) -> None:
        for serial, (kind, reason, message, count) in enumerate(items):
            self.add(o.event(namespace=namespace or obj["metadata"].get("namespace", "default"),
                             involved=o.involved(obj), reason=reason, message=message, kind=kind, count=count,
                             last=ago + 20 + serial * 7, first=ago + 900 + serial, component=component, host=host,
                             serial=serial + int(ago)))


def _gpu_node_name(index: int) -> str:
    return f"gpu-node-{index:02d}"


def _base(*, crd_groups: tuple[str, ...] = tuple(CRD_TYPES), gpu_taint: bool = False, xid_node: str = "",
          gpu_nodes: int = 12, cpu_nodes: int = 4) -> _Builder:
    """The busy healthy cluster: GPU and CPU nodes, healthy jobs and services, one unrelated crash loop."""
    b = _Builder(state=ClusterState(crd_groups=crd_groups))
    for ns in ("default", "kube-system", "ml", "serving", "perf", "web", GPU_OPERATOR):
        b.add(o.namespace(ns))
    for index in range(1, gpu_nodes + 1):
        name = _gpu_node_name(index)
        b.add(o.node(name=name, ip=f"10.0.1.{10 + index}", taints=[GPU_TAINT] if gpu_taint else [],
                     allocatable_gpus=7 if name == xid_node else None))
    _gpu_operator(b, nodes=[_gpu_node_name(index) for index in range(1, gpu_nodes + 1)])
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


def _gpu_operator(b: _Builder, *, nodes: list[str]) -> dict[str, dict[str, Any]]:
    """The GPU operator's driver and device plugin DaemonSets with one Running pod on every GPU node."""
    sets = {}
    for component, image in (("nvidia-driver-daemonset", "nvcr.io/nvidia/driver:550.90.07-ubuntu22.04"),
                             ("nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.16.1")):
        spec = o.container(name=component.removesuffix("-daemonset"), image=image, memory="512Mi", cpu="100m",
                           limits=False)
        template = {"metadata": {"labels": {"app": component}}, "spec": {"containers": [spec]}}
        daemonset = b.add({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": o.meta(name=component, namespace=GPU_OPERATOR, labels={"app": component}, age=86400 * 30,
                               kind="DaemonSet"),
            "spec": {"selector": {"matchLabels": {"app": component}}, "template": template,
                     "updateStrategy": {"type": "RollingUpdate"}},
            "status": {"currentNumberScheduled": len(nodes), "desiredNumberScheduled": len(nodes),
                       "numberMisscheduled": 0, "numberReady": len(nodes), "numberAvailable": len(nodes),
                       "updatedNumberScheduled": len(nodes), "observedGeneration": 1}})
        sets[component] = daemonset
        for node_name in nodes:
            suffix = o.uid(component, node_name)[:5]
            b.add(o.pod(namespace=GPU_OPERATOR, name=f"{component}-{suffix}", node_name=node_name, containers=[spec],
                        labels={"app": component}, owner=o.owner_ref(daemonset), restart_policy="Always",
                        age=86400 * 30, ready_since=86400 * 30))
    return sets


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


# ---------------------------------------------------------------- every workload kind (issue 13)

VLLM_IMAGE = "vllm/vllm-openai:v0.6.3"
CUSTOM_GROUP = "serving.example.com"
# The chart's `rbac.extraReadResources` an operator adds to let the bot read the lab's custom resource.
CUSTOM_READ_RESOURCES = ({"apiGroup": CUSTOM_GROUP, "resources": ["modelservers"]},)


def _vllm_container(*, name: str = "vllm", image: str = VLLM_IMAGE, gpus: int = 4) -> dict[str, Any]:
    return o.container(name=name, image=image, gpus=gpus, memory="256Gi", cpu="32",
                       env={"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(gpus)), "NCCL_DEBUG": "WARN"})


def _deployment_with_pods(b: _Builder, *, namespace: str, name: str, container: dict[str, Any],
                          pods: list[dict[str, Any]], revision: int = 1, old_pods: list[dict[str, Any]] = (),
                          conditions: list[dict[str, Any]] | None = None,
                          init_containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Deployment, its current ReplicaSet (and the previous one when `old_pods` run), and their pods.

    Each entry of `pods` / `old_pods` holds the pod builder's keyword arguments (node_name, states, ...)."""
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Always", "tolerations": [GPU_TOLERATION]}
    if init_containers:
        spec["initContainers"] = init_containers
    template = {"metadata": {"labels": {"app": name}}, "spec": spec}
    ready = sum(1 for item in list(pods) + list(old_pods) if "states" not in item)
    deployment = b.add(o.deployment(namespace=namespace, name=name, template=template,
                                    replicas=len(pods) + len(old_pods), ready=ready, updated=len(pods),
                                    conditions=conditions or [
                                        o.condition(kind="Available", status=True, reason="MinimumReplicasAvailable",
                                                    message="Deployment has minimum availability.", ago=86000),
                                        o.condition(kind="Progressing", status=True, reason="NewReplicaSetAvailable",
                                                    message=f'ReplicaSet "{name}" has successfully progressed.',
                                                    ago=86000)],
                                    revision=revision))
    sets = [(revision, pods, _template_hash(name, revision), None)]
    if old_pods:
        sets.append((revision - 1, old_pods, _template_hash(name, revision - 1),
                     container["image"].rsplit(":", 1)[0] + ":v0.6.2"))
    for rev, members, template_hash, image in sets:
        rs = b.add(o.replicaset(owner=deployment, template_hash=template_hash, revision=rev, replicas=len(members),
                                ready=sum(1 for item in members if "states" not in item), image=image))
        rs_containers = rs["spec"]["template"]["spec"]["containers"]
        for index, member in enumerate(members):
            suffix = o.uid(rs["metadata"]["name"], str(index))[:5]
            b.add(o.pod(namespace=namespace, name=f"{rs['metadata']['name']}-{suffix}", containers=rs_containers,
                        labels=rs["metadata"]["labels"], owner=o.owner_ref(rs), restart_policy="Always",
                        tolerations=[GPU_TOLERATION], init_containers=init_containers,
                        ip=f"10.244.50.{10 + index + 10 * rev}", **member))
    return deployment


def _template_hash(name: str, revision: int) -> str:
    """The pod-template-hash a revision of a Deployment gets (stable per name and revision)."""
    return o.uid(name, str(revision))[:10].replace("-", "0")


def _healthy_embedding_service(b: _Builder) -> None:
    """A healthy serving Deployment, the sibling of the serving scenarios."""
    _deployment_with_pods(b, namespace="serving", name="embed-svc",
                          container=o.container(name="tei", image="ghcr.io/huggingface/text-embeddings-inference:1.5",
                                                gpus=1, memory="16Gi", cpu="4"),
                          pods=[{"node_name": _gpu_node_name(11), "ready_since": 80000},
                                {"node_name": _gpu_node_name(12), "ready_since": 80000}])


def vllm_crashloop() -> Scenario:
    """A vLLM Deployment's new revision crash-loops: max_model_len does not fit the KV cache (its own setting)."""
    b = _base()
    log = ("INFO 11-29 22:01:12 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: "
           "model='meta-llama/Llama-3.1-70B-Instruct', tensor_parallel_size=4, max_seq_len=131072\n"
           "INFO 11-29 22:03:40 gpu_executor.py:122] # GPU blocks: 3298, # CPU blocks: 3276\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py", line 473, in '
           "raise_if_cache_size_invalid\n"
           "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be "
           "stored in KV cache (52768). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
           "initializing the engine.\n")
    crash = {"states": {"vllm": o.waiting("CrashLoopBackOff", "back-off 5m0s restarting failed container=vllm")},
             "last_states": {"vllm": o.terminated(reason="Error", exit_code=1, ago=90)}, "restarts": {"vllm": 6}}
    deployment = _deployment_with_pods(
        b, namespace="serving", name="vllm-llama", container=_vllm_container(), revision=2,
        pods=[{"node_name": _gpu_node_name(8), **crash}, {"node_name": _gpu_node_name(9), **crash}],
        old_pods=[{"node_name": _gpu_node_name(7), "ready_since": 86000}],
        conditions=[o.condition(kind="Available", status=False, reason="MinimumReplicasUnavailable",
                                message="Deployment does not have minimum availability.", ago=1500),
                    o.condition(kind="Progressing", status=False, reason="ProgressDeadlineExceeded",
                                message=f'ReplicaSet "vllm-llama-{_template_hash("vllm-llama", 2)}" has timed out '
                                        "progressing.", ago=900)])
    for pod in b.state.listing(group="", plural="pods", namespace="serving"):
        if pod["metadata"]["name"].startswith("vllm-llama") and pod["status"]["containerStatuses"][0]["restartCount"]:
            b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="vllm", text=log,
                            previous=True)
            b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="vllm",
                            text="INFO 11-29 22:10:01 api_server.py:528] vLLM API server version 0.6.3\n")
            b.events(pod, [("Warning", "BackOff", (f"Back-off restarting failed container vllm in pod "
                                                  f"{pod['metadata']['name']}_serving"), 24)],
                     host=pod["spec"]["nodeName"])
    b.events(deployment, [("Normal", "ScalingReplicaSet",
                           f"Scaled up replica set vllm-llama-{_template_hash('vllm-llama', 2)} to 2", 1)],
             component="deployment-controller")
    _healthy_embedding_service(b)
    return Scenario(name="vllm-crashloop", description=vllm_crashloop.__doc__ or "",
                    target="deployment/serving/vllm-llama", healthy_target="deployment/serving/embed-svc",
                    expected_layer="workflow", state=b.state)


def healthy_history() -> Scenario:
    """A training Job that is Running and Ready: its FailedScheduling an hour ago was resolved by Scheduled,
    an OOM kill before it by a restart that has run cleanly since, a node warning by yesterday's repair."""
    b = _base()
    _, pods = _training_job(b, name="train-llm", nodes=[_gpu_node_name(3), _gpu_node_name(4)],
                            last_states={1: o.terminated(reason="OOMKilled", exit_code=137, ago=3000)},
                            restarts={1: 1})
    message = ("0/16 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, 12 Insufficient "
               "nvidia.com/gpu. preemption: 0/16 nodes are available: 12 No preemption victims found for incoming "
               "pod, 4 Preemption is not helpful for scheduling.")
    for pod in pods:
        pod["status"]["conditions"][-1]["lastTransitionTime"] = o.ts(2900)
        pod["status"]["conditions"][-2]["lastTransitionTime"] = o.ts(2900)
        pod["status"]["containerStatuses"][0]["state"] = o.running(since=2950)
        b.events(pod, [("Warning", "FailedScheduling", message, 14)], component="default-scheduler", ago=3300)
        b.events(pod, [("Normal", "Scheduled", (f"Successfully assigned ml/{pod['metadata']['name']} to "
                                               f"{pod['spec']['nodeName']}"), 1)], component="default-scheduler",
                 ago=3200)
        b.events(pod, [("Warning", "BackOff", ("Back-off restarting failed container trainer in pod "
                                              f"{pod['metadata']['name']}_ml"), 2),
                       ("Normal", "Started", "Started container trainer", 2)], host=pod["spec"]["nodeName"],
                 ago=2960)
        b.state.add_log(namespace="ml", pod=pod["metadata"]["name"], container="trainer",
                        text="step 4100 loss 1.91 throughput 405 samples/s\n")
    b.state.add_log(namespace="ml", pod=pods[1]["metadata"]["name"], container="trainer", previous=True,
                    text="allocating pinned buffers 48.0 GiB\nKilled\n")
    b.events(b.nodes[_gpu_node_name(4)], [("Warning", "XidError", ("NVRM: Xid (PCI:0000:9b:00): 79, pid=1201, "
                                                                 "name=python, GPU has fallen off the bus."), 1)],
             host=_gpu_node_name(4), component="gpu-health-monitor", namespace="default", ago=86400)
    _healthy_sibling(b)
    return Scenario(name="healthy-history", description=healthy_history.__doc__ or "", target="ml/train-llm",
                    healthy_target="ml/train-llm-ok", expected_layer=None, state=b.state)


def init_model_download() -> Scenario:
    """A serving Deployment's init container cannot download the model weights: the Hugging Face repo is gated
    and the job's token has no access. The vLLM container waits in PodInitializing and has no log."""
    b = _base()
    downloader = o.container(name="model-download", image="python:3.12-slim", memory="4Gi", cpu="2",
                             env={"HF_HUB_ENABLE_HF_TRANSFER": "1"})
    log = ("Downloading meta-llama/Llama-3.1-8B-Instruct to /models\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/site-packages/huggingface_hub/utils/_http.py", line 406, in '
           "hf_raise_for_status\n"
           "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-6749a1f2-0c1d) Cannot "
           "access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/"
           "config.json. Access to model meta-llama/Llama-3.1-8B-Instruct is restricted.\n")
    failing = {"init_states": {"model-download": o.waiting("CrashLoopBackOff", "back-off 2m40s restarting failed "
                                                                                "container=model-download")},
               "init_last_states": {"model-download": o.terminated(reason="Error", exit_code=1, ago=60)},
               "init_restarts": {"model-download": 5}}
    _deployment_with_pods(b, namespace="serving", name="llama-8b", container=_vllm_container(gpus=1),
                          init_containers=[downloader], pods=[{"node_name": _gpu_node_name(8), **failing}])
    pod = next(item for item in b.state.listing(group="", plural="pods", namespace="serving")
               if item["metadata"]["name"].startswith("llama-8b"))
    pod["status"]["phase"] = "Pending"
    b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="model-download", text=log,
                    previous=True)
    b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="model-download",
                    text="Downloading meta-llama/Llama-3.1-8B-Instruct to /models\n")
    b.events(pod, [("Warning", "BackOff", (f"Back-off restarting failed container model-download in pod "
                                          f"{pod['metadata']['name']}_serving"), 11)], host=_gpu_node_name(8))
    _healthy_embedding_service(b)
    return Scenario(name="init-model-download", description=init_model_download.__doc__ or "",
                    target="deployment/serving/llama-8b", healthy_target="deployment/serving/embed-svc",
                    expected_layer="workflow", state=b.state)


def _pull_failure(*, name: str, image: str, detail: str, waiting_reason: str, expected: str, doc: str) -> Scenario:
    b = _base()
    _, pods = _training_job(b, name="train-llm", nodes=[_gpu_node_name(3), _gpu_node_name(4)], phase="Pending",
                            states={0: o.waiting(waiting_reason, detail if waiting_reason == "ErrImagePull"
                                                 else f'Back-off pulling image "{image}"'),
                                    1: o.waiting(waiting_reason, detail if waiting_reason == "ErrImagePull"
                                                 else f'Back-off pulling image "{image}"')})
    for pod in pods:
        pod["spec"]["containers"][0]["image"] = image
        status = pod["status"]["containerStatuses"][0]
        status["image"] = image
        b.events(pod, [("Normal", "Pulling", f'Pulling image "{image}"', 6),
                       ("Warning", "Failed", f'Failed to pull image "{image}": {detail}', 6),
                       ("Warning", "Failed", f"Error: {waiting_reason}", 6),
                       ("Normal", "BackOff", f'Back-off pulling image "{image}"', 40)], host=pod["spec"]["nodeName"])
    _healthy_sibling(b)
    return Scenario(name=name, description=doc, target="ml/train-llm", healthy_target="ml/train-llm-ok",
                    expected_layer=expected, state=b.state)


def image_tag_missing() -> Scenario:
    """The Job names an image tag that does not exist (24.13): the reference is the job's own, so workflow."""
    image = "nvcr.io/nvidia/pytorch:24.13-py3"
    return _pull_failure(
        name="image-tag-missing", image=image, waiting_reason="ErrImagePull", expected="workflow",
        doc=image_tag_missing.__doc__ or "",
        detail=f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": failed to resolve '
               f'reference "{image}": {image}: not found')


def image_registry_timeout() -> Scenario:
    """The image exists but the nodes cannot reach the registry (i/o timeout): the node's path to images, runtime."""
    image = TRAIN_IMAGE
    return _pull_failure(
        name="image-registry-timeout", image=image, waiting_reason="ImagePullBackOff", expected="runtime",
        doc=image_registry_timeout.__doc__ or "",
        detail=f'rpc error: code = DeadlineExceeded desc = failed to pull and unpack image "{image}": failed to '
               f'resolve reference "{image}": failed to do request: Head "https://nvcr.io/v2/nvidia/pytorch/'
               f'manifests/24.05-py3": dial tcp 23.45.67.89:443: i/o timeout')


def pending_node_no_driver() -> Scenario:
    """GPU pods stay Pending although Karpenter launched a node for them: gpu-node-13 joined without a working
    GPU driver (its driver pod crash-loops), so it advertises no nvidia.com/gpu and the scheduler says
    Insufficient. Placement worked; the platform did not."""
    b = _base()
    node_name = _gpu_node_name(13)
    node = b.add(o.node(name=node_name, ip="10.0.1.23", extra_labels={
        "karpenter.sh/nodepool": "gpu-h100", "node.kubernetes.io/instance-type": "p5.48xlarge"}))
    for key in ("capacity", "allocatable"):
        node["status"][key].pop("nvidia.com/gpu")  # the device plugin never registered the GPUs
    for label in ("nvidia.com/gpu.count", "nvidia.com/gpu.product"):
        node["metadata"]["labels"].pop(label)
    sets = {item["metadata"]["name"]: item for item in b.state.listing(group="apps", plural="daemonsets",
                                                                     namespace=GPU_OPERATOR)}
    driver = o.container(name="nvidia-driver", image="nvcr.io/nvidia/driver:550.90.07-ubuntu22.04", memory="512Mi",
                         cpu="100m", limits=False)
    b.add(o.pod(namespace=GPU_OPERATOR, name="nvidia-driver-daemonset-q7r2x", node_name=node_name,
                containers=[driver], labels={"app": "nvidia-driver-daemonset"}, restart_policy="Always",
                owner=o.owner_ref(sets["nvidia-driver-daemonset"]), age=1500,
                states={"nvidia-driver": o.waiting("CrashLoopBackOff", "back-off 5m0s restarting failed container")},
                last_states={"nvidia-driver": o.terminated(
                    reason="Error", exit_code=1, ago=100,
                    message="Could not resolve Linux kernel version 6.8.0-1019-aws: no precompiled driver")},
                restarts={"nvidia-driver": 9}))
    plugin = o.container(name="nvidia-device-plugin", image="nvcr.io/nvidia/k8s-device-plugin:v0.16.1",
                         memory="128Mi", cpu="50m", limits=False)
    validation = o.container(name="toolkit-validation", image="nvcr.io/nvidia/cloud-native/gpu-operator-validator:"
                             "v24.6.0", memory="64Mi", cpu="10m", limits=False)
    b.add(o.pod(namespace=GPU_OPERATOR, name="nvidia-device-plugin-daemonset-m4k8d", node_name=node_name,
                containers=[plugin], labels={"app": "nvidia-device-plugin-daemonset"}, restart_policy="Always",
                owner=o.owner_ref(sets["nvidia-device-plugin-daemonset"]), age=1500,
                init_containers=[validation],
                init_states={"toolkit-validation": o.waiting("PodInitializing")}))
    b.add(o.custom(api_version="karpenter.sh/v1", kind="NodeClaim", namespace=None, name="gpu-h100-x7k2p",
                   labels={"karpenter.sh/nodepool": "gpu-h100", "node.kubernetes.io/instance-type": "p5.48xlarge"},
                   spec={"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                         "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                           "values": ["p5.48xlarge"]}],
                         "resources": {"requests": {"nvidia.com/gpu": "16"}}},
                   status={"nodeName": node_name, "providerID": "aws:///us-east-1a/i-0a1b2c3d4e5f",
                           "capacity": {"cpu": "192", "memory": "2Ti"},
                           "conditions": [
                               o.condition(kind="Launched", status=True, reason="Launched", message="", ago=1700),
                               o.condition(kind="Registered", status=True, reason="Registered", message="", ago=1500),
                               o.condition(kind="Initialized", status=False, reason="ResourceNotRegistered",
                                           message='Resource "nvidia.com/gpu" was requested but not registered',
                                           ago=1500),
                               o.condition(kind="Ready", status=False, reason="ResourceNotRegistered",
                                           message="Initialized=False", ago=1500)]}, age=1700))
    message = ("0/17 nodes are available: 13 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's node "
               "affinity/selector. preemption: 0/17 nodes are available: 13 No preemption victims found for "
               "incoming pod, 4 Preemption is not helpful for scheduling.")
    _, pods = _training_job(b, name="train-llm", nodes=[None, None], phase="Pending",
                            scheduled=(False, "Unschedulable", message))
    _scheduling_events(b, pods, message)
    b.events(pods[0], [("Normal", "Nominated", "Pod should schedule on: nodeclaim/gpu-h100-x7k2p", 1)],
             component="karpenter", ago=1700)
    pods[1]["status"]["nominatedNodeName"] = node_name
    _healthy_sibling(b)
    return Scenario(name="pending-node-no-driver", description=pending_node_no_driver.__doc__ or "",
                    target="ml/train-llm", healthy_target="ml/train-llm-ok", expected_layer="runtime", state=b.state)


def nccl_path_hostnames() -> Scenario:
    """NCCL NET/IB errors between the master and worker pods of a PyTorchJob; the logs name pod hostnames and pod
    IPs, not nodes: one path between gpu-node-03 and gpu-node-07, not three or four places."""
    b = _base()
    nodes = [_gpu_node_name(3), _gpu_node_name(7)]
    _, pods = _training_job(b, name="train-llm", nodes=nodes, kind="pytorchjob",
                            states={0: o.waiting("CrashLoopBackOff", "back-off 1m20s"),
                                    1: o.waiting("CrashLoopBackOff", "back-off 1m20s")},
                            last_states={0: o.terminated(reason="Error", exit_code=1),
                                         1: o.terminated(reason="Error", exit_code=1)},
                            restarts={0: 2, 1: 2})
    ips = [pod["status"]["podIP"] for pod in pods]
    for index, pod in enumerate(pods):
        host, peer_ip = pod["metadata"]["name"], ips[1 - index]
        log = (f"{host}:48213:48290 [2] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
               f"[3]mlx5_3:1/IB ; OOB eth0:{ips[index]}<0>\n"
               f"{host}:48213:48291 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
               f"{peer_ip}<52431> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_2\n"
               f"{host}:48213:48291 [2] NCCL INFO transport/net.cc:1134 -> 6\n"
               "RuntimeError: NCCL communicator was aborted on rank 1. Original reason for failure was: NCCL "
               "error: remote process exited or there was a network error, NCCL version 2.21.5\n")
        b.state.add_log(namespace="ml", pod=host, container="trainer", text=log, previous=True)
        b.state.add_log(namespace="ml", pod=host, container="trainer",
                        text=f"{host}:50001:50001 [0] NCCL INFO Bootstrap : Using eth0:{ips[index]}<0>\n")
        b.events(pod, [("Warning", "BackOff", f"Back-off restarting failed container trainer in pod {host}_ml", 5)],
                 host=nodes[index])
    _healthy_sibling(b)
    return Scenario(name="nccl-path-hostnames", description=nccl_path_hostnames.__doc__ or "",
                    target="pytorchjob/ml/train-llm", healthy_target="ml/train-llm-ok", expected_layer="fabric",
                    state=b.state)


def statefulset_nfs() -> Scenario:
    """A Triton StatefulSet's second replica cannot mount its model volume: the NFS server does not answer."""
    b = _base()
    container = o.container(name="triton", image="nvcr.io/nvidia/tritonserver:24.05-py3", gpus=1, memory="64Gi")
    template = {"metadata": {"labels": {"app": "triton-ensemble"}},
                "spec": {"containers": [container], "restartPolicy": "Always"}}
    sts = b.add(o.statefulset(namespace="serving", name="triton-ensemble", template=template, replicas=2, ready=1))
    labels = {"app": "triton-ensemble", "apps.kubernetes.io/pod-index": "0",
              "statefulset.kubernetes.io/pod-name": "triton-ensemble-0"}
    b.add(o.pod(namespace="serving", name="triton-ensemble-0", node_name=_gpu_node_name(5), containers=[container],
                labels=labels, owner=o.owner_ref(sts), restart_policy="Always", hostname="triton-ensemble-0",
                subdomain="triton-ensemble", ready_since=80000, ip="10.244.60.2"))
    stuck = b.add(o.pod(namespace="serving", name="triton-ensemble-1", node_name=_gpu_node_name(6),
                        containers=[container], phase="Pending", restart_policy="Always",
                        labels={**labels, "apps.kubernetes.io/pod-index": "1",
                                "statefulset.kubernetes.io/pod-name": "triton-ensemble-1"},
                        owner=o.owner_ref(sts), hostname="triton-ensemble-1", subdomain="triton-ensemble",
                        states={"triton": o.waiting("ContainerCreating")}, ip="10.244.60.3"))
    b.events(stuck, [("Warning", "FailedMount", ('MountVolume.SetUp failed for volume "models" : mount failed: exit '
                                                "status 32\nMounting command: mount\nMounting arguments: -t nfs "
                                                "10.0.5.2:/models /var/lib/kubelet/pods/x/volumes/models\nOutput: "
                                                "mount.nfs: Connection timed out"), 9)], host=_gpu_node_name(6))
    _healthy_embedding_service(b)
    return Scenario(name="statefulset-nfs", description=statefulset_nfs.__doc__ or "",
                    target="statefulset/serving/triton-ensemble", healthy_target="deployment/serving/embed-svc",
                    expected_layer="fabric", state=b.state)


def _cron(b: _Builder, *, name: str, succeeded: bool, log: str) -> None:
    container = o.container(name="eval", image="nvcr.io/nvidia/pytorch:24.05-py3", gpus=8, memory="512Gi")
    template = {"metadata": {}, "spec": {"containers": [container], "restartPolicy": "Never",
                                         "tolerations": [GPU_TOLERATION]}}
    last = 3 * 3600 + o.NOW.second  # runs at 02:00 sharp: schedule times are whole minutes
    cron = b.add(o.cronjob(namespace="ml", name=name, job_template={"template": template, "backoffLimit": 0},
                           schedule="0 2 * * *", last_schedule_ago=last,
                           last_success_ago=last if succeeded else last + 86400))
    # As the CronJob controller names a run: `<cronjob>-<scheduled time in minutes since the epoch>`.
    job_name = f"{name}-{int((o.NOW - timedelta(seconds=last)).timestamp()) // 60}"
    conditions = [o.condition(kind="Complete", status=True, reason="", message="", ago=last - 1800)] if succeeded \
        else [o.condition(kind="Failed", status=True, reason="BackoffLimitExceeded",
                          message="Job has reached the specified backoff limit", ago=last - 600)]
    job = b.add(o.job(namespace="ml", name=job_name, template=template, succeeded=int(succeeded),
                      failed=int(not succeeded), conditions=conditions, age=last))
    job["metadata"]["ownerReferences"] = [{**o.owner_ref(cron), "controller": True, "blockOwnerDeletion": True}]
    pod = b.add(o.pod(namespace="ml", name=f"{job_name}-x8c2v", node_name=_gpu_node_name(2 if succeeded else 6),
                      containers=[container], labels={"batch.kubernetes.io/job-name": job_name,
                                                      "job-name": job_name},
                      owner=o.owner_ref(job), phase="Succeeded" if succeeded else "Failed", restart_policy="Never",
                      states={"eval": o.terminated(reason="Completed" if succeeded else "Error",
                                                   exit_code=0 if succeeded else 1, ago=last - 600)},
                      age=last))
    b.state.add_log(namespace="ml", pod=pod["metadata"]["name"], container="eval", text=log)
    if not succeeded:
        b.events(job, [("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit", 1)],
                 component="job-controller", ago=last - 600)


def cronjob_latest() -> Scenario:
    """A nightly evaluation CronJob: last night's run (its latest Job) failed because the checkpoint it names is
    not there; the run before succeeded."""
    b = _base()
    _cron(b, name="nightly-eval", succeeded=False,
          log="loading checkpoint /ckpt/llama-70b/step-9000\nTraceback (most recent call last):\n"
              '  File "/workspace/eval.py", line 41, in <module>\n'
              "FileNotFoundError: [Errno 2] No such file or directory: "
              "'/ckpt/llama-70b/step-9000/model-00001-of-00030.safetensors'\n")
    _cron(b, name="nightly-export", succeeded=True, log="exported 30 shards\n")
    _healthy_sibling(b)
    return Scenario(name="cronjob-latest", description=cronjob_latest.__doc__ or "",
                    target="cronjob/ml/nightly-eval", healthy_target="cronjob/ml/nightly-export",
                    expected_layer="workflow", state=b.state)


def _ray_job(b: _Builder, *, name: str, workers_scheduled: bool, message: str = "") -> None:
    cluster = f"{name}-raycluster-x7k2p"
    running = workers_scheduled
    rayjob = b.add(o.custom(
        api_version="ray.io/v1", kind="RayJob", namespace="ml", name=name,
        spec={"entrypoint": "python /home/ray/tune.py", "shutdownAfterJobFinishes": True,
              "rayClusterSpec": {"headGroupSpec": {}, "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2}]}},
        status={"jobDeploymentStatus": "Running" if running else "Initializing",
                "jobStatus": "RUNNING" if running else "PENDING", "rayClusterName": cluster,
                "startTime": o.ts(1800)}))
    raycluster = b.add(o.custom(api_version="ray.io/v1", kind="RayCluster", namespace="ml", name=cluster,
                                spec={}, status={"state": "ready" if running else "", "desiredWorkerReplicas": 2,
                                                 "availableWorkerReplicas": 2 if running else 0}))
    raycluster["metadata"]["ownerReferences"] = [{**o.owner_ref(rayjob), "controller": True}]
    head = o.container(name="ray-head", image="rayproject/ray-ml:2.9.0-gpu", memory="32Gi", cpu="8")
    worker = o.container(name="ray-worker", image="rayproject/ray-ml:2.9.0-gpu", gpus=8, memory="512Gi", cpu="64")
    labels = {"ray.io/cluster": cluster, "ray.io/is-ray-node": "yes"}
    b.add(o.pod(namespace="ml", name=f"{cluster}-head-k2x9f", node_name="cpu-node-03", containers=[head],
                labels={**labels, "ray.io/node-type": "head"}, owner=o.owner_ref(raycluster),
                restart_policy="Always", ready_since=1700, ip=f"10.244.70.{2 + running}"))
    for index in range(2):
        pod = b.add(o.pod(
            namespace="ml", name=f"{cluster}-gpu-worker-{o.uid(cluster, str(index))[:5]}",
            node_name=_gpu_node_name(1 + index) if running else None, containers=[worker],
            labels={**labels, "ray.io/node-type": "worker", "ray.io/group": "gpu"}, owner=o.owner_ref(raycluster),
            restart_policy="Always", phase="Running" if running else "Pending", ready_since=1700,
            scheduled=(True, "", "") if running else (False, "Unschedulable", message),
            tolerations=[GPU_TOLERATION] if running else [], ip=f"10.244.71.{2 + index + 10 * running}"))
        if not running:
            _scheduling_events(b, [pod], message)


def rayjob_pending() -> Scenario:
    """A RayJob stays Initializing: its GPU workers cannot be placed, the GPU nodes' taint is not tolerated."""
    b = _base(gpu_taint=True)
    message = ("0/16 nodes are available: 12 node(s) had untolerated taint {nvidia.com/gpu: present}, 4 Insufficient "
               "nvidia.com/gpu. preemption: 0/16 nodes are available: 16 Preemption is not helpful for scheduling.")
    _ray_job(b, name="rl-tune", workers_scheduled=False, message=message)
    _ray_job(b, name="rl-tune-ok", workers_scheduled=True)
    _healthy_sibling(b)
    return Scenario(name="rayjob-pending", description=rayjob_pending.__doc__ or "", target="rayjob/ml/rl-tune",
                    healthy_target="rayjob/ml/rl-tune-ok", expected_layer="scheduler", state=b.state)


def _inference_service(b: _Builder, *, name: str, failing: bool) -> None:
    oom = ("INFO:     Loading model /mnt/models (llama-3.1-8b)\n"
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "79.10 GiB of which 1.20 GiB is free. Process 3121 has 77.88 GiB memory in use.\n")
    conditions = [o.condition(kind=kind, status=not failing, reason="" if not failing else "RevisionFailed",
                              message="" if not failing else f'Revision "{name}-predictor-00001" failed with message: '
                                                             "Container failed with: torch.OutOfMemoryError: CUDA out "
                                                             "of memory.", ago=1200)
                  for kind in ("PredictorReady", "Ready")]
    model_status = {"states": {"activeModelState": "" if failing else "Loaded",
                               "targetModelState": "FailedToLoad" if failing else "Loaded"},
                    "transitionStatus": "BlockedByFailedLoad" if failing else "UpToDate"}
    if failing:
        model_status["lastFailureInfo"] = {"reason": "ModelLoadFailed", "exitCode": 1,
                                           "message": "torch.OutOfMemoryError: CUDA out of memory."}
    isvc = b.add(o.custom(api_version="serving.kserve.io/v1beta1", kind="InferenceService", namespace="serving",
                          name=name, spec={"predictor": {"model": {"modelFormat": {"name": "huggingface"},
                                                                   "storageUri": "hf://meta-llama/Llama-3.1-8B"}}},
                          status={"conditions": conditions, "modelStatus": model_status,
                                  "url": f"http://{name}.serving.example.com"}))
    container = o.container(name="kserve-container", image="kserve/huggingfaceserver:v0.14.0-gpu", gpus=1,
                            memory="64Gi")
    initializer = o.container(name="storage-initializer", image="kserve/storage-initializer:v0.14.0", memory="4Gi",
                              cpu="1", limits=False)
    state = {"states": {"kserve-container": o.waiting("CrashLoopBackOff", "back-off 2m40s")},
             "last_states": {"kserve-container": o.terminated(reason="Error", exit_code=1, ago=70)},
             "restarts": {"kserve-container": 5}} if failing else {"ready_since": 80000}
    pod = b.add(o.pod(namespace="serving", name=f"{name}-predictor-00001-deployment-6b8c9-{o.uid(name)[:5]}",
                      node_name=_gpu_node_name(9 if failing else 10), containers=[container],
                      init_containers=[initializer], restart_policy="Always", owner=o.owner_ref(isvc),
                      labels={"serving.kserve.io/inferenceservice": name, "component": "predictor"},
                      ip=f"10.244.80.{2 + failing}", **state))
    if failing:
        b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="kserve-container", text=oom,
                        previous=True)
        b.events(pod, [("Warning", "BackOff", (f"Back-off restarting failed container kserve-container in pod "
                                              f"{pod['metadata']['name']}_serving"), 17)], host=_gpu_node_name(9))


def inferenceservice_oom() -> Scenario:
    """A KServe InferenceService never becomes Ready: its predictor runs out of GPU memory loading the model."""
    b = _base()
    _inference_service(b, name="llama-isvc", failing=True)
    _inference_service(b, name="llama-isvc-ok", failing=False)
    return Scenario(name="inferenceservice-oom", description=inferenceservice_oom.__doc__ or "",
                    target="inferenceservice/serving/llama-isvc", healthy_target="isvc/serving/llama-isvc-ok",
                    expected_layer="runtime", state=b.state)


def bare_pod() -> Scenario:
    """A bare smoke-test pod fails on gpu-node-05: NVML reports a driver/library version mismatch on the node."""
    b = _base()
    container = o.container(name="smoke", image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", gpus=8, memory="8Gi")
    pod = b.add(o.pod(namespace="ml", name="gpu-smoke", node_name=_gpu_node_name(5), containers=[container],
                      phase="Failed", restart_policy="Never", tolerations=[GPU_TOLERATION],
                      states={"smoke": o.terminated(reason="Error", exit_code=255, ago=300)}))
    b.state.add_log(namespace="ml", pod="gpu-smoke", container="smoke",
                    text="+ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n"
                         "NVML library version: 550.127\n")
    b.events(pod, [("Normal", "Started", "Started container smoke", 1)], host=_gpu_node_name(5))
    b.add(o.pod(namespace="ml", name="debug-shell", node_name=_gpu_node_name(1), containers=[
        o.container(name="shell", image="ubuntu:24.04", memory="1Gi", cpu="1")], restart_policy="Always",
        ready_since=7000))
    return Scenario(name="bare-pod", description=bare_pod.__doc__ or "", target="pod/ml/gpu-smoke",
                    healthy_target="pod/ml/debug-shell", expected_layer="runtime", state=b.state)


def _model_server(b: _Builder, *, name: str, image: str, failing: bool) -> None:
    selector = f"{CUSTOM_GROUP}/server={name}"
    server = b.add(o.custom(api_version=f"{CUSTOM_GROUP}/v1", kind="ModelServer", namespace="serving", name=name,
                            spec={"model": "llama-3.1-8b", "replicas": 2, "image": image},
                            status={"replicas": 2, "readyReplicas": 0 if failing else 2, "selector": selector,
                                    "phase": "Degraded" if failing else "Serving"}))
    container = o.container(name="server", image=image, gpus=1, memory="64Gi")
    for index in range(2):
        state = {"states": {"server": o.waiting("CrashLoopBackOff", "back-off 1m20s")},
                 "last_states": {"server": o.terminated(reason="Error", exit_code=255, ago=50)},
                 "restarts": {"server": 4}} if failing else {"ready_since": 9000}
        pod = b.add(o.pod(namespace="serving", name=f"{name}-{index}", node_name=_gpu_node_name(10 + index),
                          containers=[container], labels={f"{CUSTOM_GROUP}/server": name},
                          owner=o.owner_ref(server), restart_policy="Always", ip=f"10.244.90.{index + 2 + 5 * failing}",
                          **state))
        if failing:
            b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="server", previous=True,
                            text="exec /usr/local/bin/python3: exec format error\n")
    # Another workload's pod carries the same label but is not owned by the server: it must not be read.
    if failing:
        b.add(o.pod(namespace="serving", name=f"{name}-canary", node_name=_gpu_node_name(12), containers=[container],
                    labels={f"{CUSTOM_GROUP}/server": name}, restart_policy="Always",
                    states={"server": o.waiting("CrashLoopBackOff", "back-off 5m0s")}, restarts={"server": 30}))


def unknown_crd() -> Scenario:
    """A custom resource the bot has no table for (ModelServer, serving.example.com) owns pods that crash: its
    image was built for arm64 (exec format error). Found by its status.selector and owner references."""
    b = _base()
    _model_server(b, name="llama-srv", image="registry.example.com/serving/llama-srv:1.2-arm64", failing=True)
    _model_server(b, name="llama-srv-ok", image="registry.example.com/serving/llama-srv:1.2", failing=False)
    return Scenario(name="unknown-crd", description=unknown_crd.__doc__ or "",
                    target=f"modelservers.{CUSTOM_GROUP}/serving/llama-srv",
                    healthy_target=f"modelservers.{CUSTOM_GROUP}/serving/llama-srv-ok", expected_layer="workflow",
                    state=b.state)


def healthy_serving() -> Scenario:
    """A serving Deployment that is healthy now: one replica restarted two hours ago and its readiness probe failed
    then; its current log mentions a refused connection to a metrics gateway it retries. No current failure."""
    b = _base()
    container = _vllm_container(gpus=1)
    _deployment_with_pods(
        b, namespace="serving", name="vllm-chat", container=container,
        pods=[{"node_name": _gpu_node_name(8), "ready_since": 7000},
              {"node_name": _gpu_node_name(9), "ready_since": 7000,
               "last_states": {"vllm": o.terminated(reason="Error", exit_code=1, ago=7300)},
               "restarts": {"vllm": 1}}])
    for pod in b.state.listing(group="", plural="pods", namespace="serving"):
        if not pod["metadata"]["name"].startswith("vllm-chat"):
            continue
        pod["status"]["containerStatuses"][0]["state"] = o.running(since=7100)
        b.events(pod, [("Warning", "Unhealthy", ("Readiness probe failed: Get \"http://10.244.50.11:8000/health\": "
                                                "dial tcp 10.244.50.11:8000: connect: connection refused"), 12)],
                 host=pod["spec"]["nodeName"], ago=7200)
        b.state.add_log(namespace="serving", pod=pod["metadata"]["name"], container="vllm",
                        text="INFO:     Started server process [1]\nWARNING metrics: push to "
                             "pushgateway.monitoring:9091 failed: connection refused; retrying in 30s\n"
                             "INFO:     10.244.20.3:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n")
    _healthy_embedding_service(b)
    return Scenario(name="healthy-serving", description=healthy_serving.__doc__ or "",
                    target="deployment/serving/vllm-chat", healthy_target="deployment/serving/embed-svc",
                    expected_layer=None, state=b.state)


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
    "vllm-crashloop": vllm_crashloop,
    "healthy-history": healthy_history,
    "init-model-download": init_model_download,
    "image-tag-missing": image_tag_missing,
    "image-registry-timeout": image_registry_timeout,
    "pending-node-no-driver": pending_node_no_driver,
    "nccl-path-hostnames": nccl_path_hostnames,
    "statefulset-nfs": statefulset_nfs,
    "cronjob-latest": cronjob_latest,
    "rayjob-pending": rayjob_pending,
    "inferenceservice-oom": inferenceservice_oom,
    "bare-pod": bare_pod,
    "unknown-crd": unknown_crd,
    "healthy-serving": healthy_serving,
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
