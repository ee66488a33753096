"""Node scenarios: the busy lab cluster with NVIDIA's GPU operator on every GPU node, and one node to triage.

A node with GPU Xid 79, one whose driver pod crash-loops, one NotReady, and a healthy one (no layer).
Each target is a node key (`node:<name>`); `/triage node <name>` and `triage-bot triage node` read them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.lab import objects as o
from bot.lab import scenarios as base
from bot.lab.scenarios import Scenario

OPERATOR_NAMESPACE = "gpu-operator"
DRIVER_IMAGE = "nvcr.io/nvidia/driver:550.90.07-ubuntu22.04"
STACK = (
    ("nvidia-driver-daemonset", "nvidia-driver-ctr", DRIVER_IMAGE),
    ("nvidia-device-plugin-daemonset", "nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.15.0"),
    ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.6-3.4.2-ubuntu22.04"),
    ("nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr",
     "nvcr.io/nvidia/k8s/container-toolkit:v1.15.0-ubuntu20.04"),
)
HEALTHY_NODE = "gpu-node-02"


def _daemonset_ref(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": o.uid("DaemonSet", OPERATOR_NAMESPACE, name)}


def _operator(b: Any, *, nodes: list[str], states: dict[tuple[str, str], dict[str, Any]] | None = None,
              last_states: dict[tuple[str, str], dict[str, Any]] | None = None,
              restarts: dict[tuple[str, str], int] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """The GPU operator's daemon pods on each GPU node; (app, node) -> pod."""
    b.add(o.namespace(OPERATOR_NAMESPACE))
    pods = {}
    for index, node in enumerate(nodes):
        for app, container, image in STACK:
            key = (app, node)
            pod = o.pod(namespace=OPERATOR_NAMESPACE, name=f"{app}-{node[-2:]}x{index:02d}", node_name=node,
                        containers=[o.container(name=container, image=image, memory="1Gi", cpu="200m")],
                        labels={"app": app, "app.kubernetes.io/part-of": "gpu-operator"}, owner=_daemonset_ref(app),
                        states={container: (states or {}).get(key, o.running())},
                        last_states={container: (last_states or {}).get(key, {})},
                        restarts={container: (restarts or {}).get(key, 0)}, ip=f"10.244.{50 + index}.{len(pods) % 4 + 2}",
                        tolerations=[base.GPU_TOLERATION], age=86400 * 7)
            pods[key] = b.add(pod)
    return pods


def _gpu_nodes(count: int = 12) -> list[str]:
    return [f"gpu-node-{index:02d}" for index in range(1, count + 1)]


def _node_scenario(*, name: str, doc: str, node: str, expected: str | None, b: Any) -> Scenario:
    return Scenario(name=name, description=doc, target=f"node:{node}", healthy_target=f"node:{HEALTHY_NODE}",
                    expected_layer=expected, state=b.state,
                    unrelated="pod/web/cache-warmer-7d9f (CrashLoopBackOff on cpu-node-02, not on the node)")


def node_xid() -> Scenario:
    """gpu-node-05 reports GPU Xid 79 (fallen off the bus); the device plugin withdrew one GPU; a JobSet runs on it."""
    node = "gpu-node-05"
    b = base._base(xid_node=node)
    _operator(b, nodes=_gpu_nodes())
    base._training_job(b, name="train-llm", nodes=[node, "gpu-node-06"], kind="jobset")
    b.events(b.nodes[node], [
        ("Warning", "XidError", ("NVRM: Xid (PCI:0000:9b:00): 79, pid=48213, name=python, GPU has fallen off the "
                                "bus."), 3),
        ("Warning", "GPUUnhealthy", ("nvidia.com/gpu GPU-5c1e0e5a-7b9c-4f5e-9d7e-1a2b3c4d5e6f marked unhealthy "
                                    "by device plugin"), 1)], host=node, component="gpu-health-monitor",
        namespace="default")
    base._healthy_sibling(b)
    return _node_scenario(name="node-xid", doc=node_xid.__doc__ or "", node=node, expected="runtime", b=b)


def node_driver() -> Scenario:
    """gpu-node-08: the GPU operator's driver pod crash-loops (kernel module will not load); no GPU is allocatable."""
    node = "gpu-node-08"
    b = base._base()
    b.nodes[node]["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    driver = ("nvidia-driver-daemonset", node)
    plugin = ("nvidia-device-plugin-daemonset", node)
    pods = _operator(
        b, nodes=_gpu_nodes(),
        states={driver: o.waiting("CrashLoopBackOff", "back-off 5m0s restarting failed container"),
                plugin: o.waiting("CrashLoopBackOff", "back-off 2m40s restarting failed container")},
        last_states={driver: o.terminated(reason="Error", exit_code=1), plugin: o.terminated(reason="Error", exit_code=1)},
        restarts={driver: 17, plugin: 9})
    driver_pod, plugin_pod = pods[driver]["metadata"]["name"], pods[plugin]["metadata"]["name"]
    b.state.add_log(namespace=OPERATOR_NAMESPACE, pod=driver_pod, container="nvidia-driver-ctr", previous=True,
                    text="Installing NVIDIA driver kernel modules...\n"
                         "insmod: ERROR: could not insert module nvidia.ko: Unknown symbol in module\n"
                         "NVRM: RmInitAdapter failed! (0x22:0x56:742)\n"
                         "Could not load the NVIDIA driver kernel modules\n")
    b.state.add_log(namespace=OPERATOR_NAMESPACE, pod=plugin_pod, container="nvidia-device-plugin", previous=True,
                    text="Loading NVML\nFailed to initialize NVML: could not load NVML library.\n")
    b.events(pods[driver], [("Warning", "BackOff", (f"Back-off restarting failed container nvidia-driver-ctr in pod "
                                                   f"{driver_pod}_{OPERATOR_NAMESPACE}"), 96)], host=node)
    base._training_job(b, name="train-llm", nodes=["gpu-node-09"])
    base._healthy_sibling(b)
    return _node_scenario(name="node-driver", doc=node_driver.__doc__ or "", node=node, expected="runtime", b=b)


def node_not_ready() -> Scenario:
    """gpu-node-07 stopped reporting (Ready=Unknown, unreachable taints) while a training Job ran on it."""
    node = "gpu-node-07"
    b = base._base()
    status = b.nodes[node]["status"]
    for condition in status["conditions"]:
        condition.update({"status": "Unknown", "reason": "NodeStatusUnknown",
                          "message": "Kubelet stopped posting node status.", "lastTransitionTime": o.ts(600),
                          "lastHeartbeatTime": o.ts(660)})
    b.nodes[node]["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": o.ts(600)},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": o.ts(590)}]
    _operator(b, nodes=_gpu_nodes())
    base._training_job(b, name="train-llm", nodes=[node, "gpu-node-04"])
    base._healthy_sibling(b)
    return _node_scenario(name="node-not-ready", doc=node_not_ready.__doc__ or "", node=node, expected="runtime", b=b)


def node_healthy() -> Scenario:
    """gpu-node-02: Ready, schedulable, all eight GPUs allocatable, GPU operator pods running, a healthy job on it."""
    b = base._base()
    _operator(b, nodes=_gpu_nodes())
    base._healthy_sibling(b)
    return _node_scenario(name="node-healthy", doc=node_healthy.__doc__ or "", node=HEALTHY_NODE, expected=None, b=b)


NODE_SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "node-xid": node_xid,
    "node-driver": node_driver,
    "node-not-ready": node_not_ready,
    "node-healthy": node_healthy,
}
