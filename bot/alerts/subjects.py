"""What an alert is about, from its labels: a workload (namespace + job/owner labels) or a node.

Workload labels, most specific first: kube-state-metrics' `job_name` (kube_job_*), pod labels exported as
`label_*` (`label_batch_kubernetes_io_job_name`, `label_jobset_sigs_k8s_io_jobset_name`,
`label_training_kubeflow_org_job_name`), owner labels (`owner_kind`/`owner_name` of kube_pod_owner,
`created_by_kind`/`created_by_name` of kube_pod_info), then `deployment`, `statefulset`. A bare `pod` is
resolved to its owner by the caller (a bounded read). Node labels: `node` (kube-state-metrics), `Hostname`
(dcgm-exporter; `gpu`, `UUID` and `modelName` name the GPU), then `instance` without its port.

Every name goes through the same validation as a typed `/triage job` or `/triage node` id.
"""

from __future__ import annotations

import dataclasses
import ipaddress

from bot.evidence.node_targets import parse_node_target
from bot.evidence.targets import InvalidTarget, Platform, Target, WorkloadKind, parse_target

# (label, workload kind) for labels that name the workload directly.
_WORKLOAD_LABELS = (
    ("job_name", "job"),
    ("label_jobset_sigs_k8s_io_jobset_name", "jobset"),
    ("jobset_name", "jobset"),
    ("label_training_kubeflow_org_job_name", "pytorchjob"),
    ("label_batch_kubernetes_io_job_name", "job"),
    ("label_job_name", "job"),
    ("deployment", "deployment"),
    ("statefulset", "statefulset"),
)
_OWNER_LABELS = (("owner_kind", "owner_name"), ("created_by_kind", "created_by_name"))
_NODE_LABELS = ("node", "Hostname", "kubernetes_node", "nodename")
# dcgm-exporter series name a GPU: such an alert is about the node's hardware, whatever pod used the GPU.
_GPU_LABELS = ("UUID", "gpu", "modelName", "pci_bus_id")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodRef:
    """A pod whose owner must be read to know the workload."""

    namespace: str
    pod: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Subject:
    """What the alert is about: a target, a pod to resolve, or why it maps to nothing."""

    target: Target | None = None
    pod: PodRef | None = None
    reason: str = ""
    gpu: dict[str, str] = dataclasses.field(default_factory=dict)


def workload_target(*, namespace: str, kind: str, name: str) -> Target:
    """A workload target through parse_target's validation; kinds the snapshot does not know yet are kind-less."""
    try:
        known = WorkloadKind(kind)
    except ValueError:
        return parse_target(f"{namespace}/{name}")
    return parse_target(f"{known.value}/{namespace}/{name}")


def _owner(kind: str, name: str, labels: dict[str, str]) -> tuple[str, str] | None:
    kind = kind.lower()
    if kind == "replicaset":
        template_hash = labels.get("label_pod_template_hash") or labels.get("pod_template_hash") or ""
        if template_hash and name.endswith(f"-{template_hash}"):
            return "deployment", name[: -len(template_hash) - 1]
        head, _, tail = name.rpartition("-")
        return ("deployment", head) if head and 5 <= len(tail) <= 10 and tail.isalnum() else None
    if kind in ("job", "jobset", "pytorchjob", "statefulset", "aiperfjob"):
        return kind, name
    return None


def _workload(labels: dict[str, str]) -> Subject | None:
    namespace = labels.get("namespace") or labels.get("exported_namespace")
    if not namespace:
        return None
    found: tuple[str, str] | None = None
    for label, kind in _WORKLOAD_LABELS:
        if labels.get(label):
            found = (kind, labels[label])
            break
    if found is None:
        for kind_label, name_label in _OWNER_LABELS:
            if labels.get(kind_label) and labels.get(name_label):
                found = _owner(labels[kind_label], labels[name_label], labels)
                if found:
                    break
    try:
        if found is not None:
            return Subject(target=workload_target(namespace=namespace, kind=found[0], name=found[1]))
        pod = labels.get("pod") or labels.get("exported_pod")
        if pod:
            parse_target(f"{namespace}/{pod}")  # the same validation, before anyone reads the pod
            return Subject(pod=PodRef(namespace=namespace, pod=pod))
    except InvalidTarget as error:
        return Subject(reason=f"workload labels do not name a valid workload: {error}"[:300])
    return None


def _node(labels: dict[str, str], *, platform: str) -> Subject | None:
    name = next((labels[label] for label in _NODE_LABELS if labels.get(label)), "")
    if not name and labels.get("instance"):
        host = labels["instance"].rsplit(":", 1)[0] if labels["instance"].count(":") == 1 else labels["instance"]
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            name = host
        else:
            return Subject(reason=f"`instance` is an address ({host[:60]}), not a node name: relabel it to the node "
                                  "name or add a `node` label")
    if not name:
        return None
    gpu = {label: labels[label] for label in _GPU_LABELS if labels.get(label)}
    try:
        raw = f"slurm:{name}" if platform == Platform.SLURM.value else name
        return Subject(target=parse_node_target(raw), gpu=gpu)
    except InvalidTarget as error:
        return Subject(reason=f"node labels do not name a valid node: {error}"[:300])


def subject_of(labels: dict[str, str], *, prefer: str = "auto", node_platform: str = "kubernetes") -> Subject:
    """The alert's subject: `workload` or `node` when a rule says so; `auto`: GPU hardware series are about
    the node, otherwise the workload when its labels name one, otherwise the node."""
    gpu_series = any(labels.get(label) for label in _GPU_LABELS) and bool(
        labels.get("Hostname") or labels.get("node"))
    order = {"workload": ("workload",), "node": ("node",)}.get(
        prefer, ("node", "workload") if gpu_series else ("workload", "node"))
    reasons = []
    for kind in order:
        found = _workload(labels) if kind == "workload" else _node(labels, platform=node_platform)
        if found is not None and (found.target is not None or found.pod is not None):
            return found
        if found is not None:
            reasons.append(found.reason)
    if reasons:
        return Subject(reason=reasons[0])
    wanted = {"workload": "namespace plus job_name, owner_kind/owner_name or pod",
              "node": "node, Hostname or instance"}
    return Subject(reason="no label names " + " or ".join(wanted[kind] for kind in order))
