"""Where each workload kind is served and how its pods are found: owner references and selectors, never a sweep."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from bot.evidence.targets import WorkloadKind


class PodLookup(enum.StrEnum):
    """How a kind's pods are found, always namespace-scoped and label- or field-selected.

    Kinds marked `owned` keep only pods whose controller is the workload or a child it owns (read on the way);
    the others trust a label only their own controller sets (JobSet, LWS, KServe, Ray, Volcano, AIPerf), since
    checking ownership through their intermediate Jobs would cost a read per child.
    """

    LABELS = "labels"  # a label the controller sets to the workload's name (first label that finds pods wins)
    SELECTOR = "selector"  # the object's own spec.selector; pods kept only when the workload (or its child) owns them
    SELF = "self"  # the target is a pod
    CRONJOB = "cronjob"  # the CronJob's latest Jobs, then their pods
    RAYJOB = "rayjob"  # the Ray cluster's pods and the submitter Job's pod
    CUSTOM = "custom"  # an unknown kind: its spec/status selector or instance label, kept by owner reference


@dataclasses.dataclass(frozen=True, kw_only=True)
class KindSpec:
    """One kind: its API group, versions (tried in order), plural and pod lookup."""

    kind: WorkloadKind | None
    group: str
    versions: tuple[str, ...]
    plural: str
    lookup: PodLookup
    labels: tuple[str, ...] = ()
    owned: bool = False
    title: str = ""

    def collection(self, version: str) -> str:
        """The namespaced collection path for one version, with a `{namespace}` placeholder."""
        base = f"/api/{version}" if not self.group else f"/apis/{self.group}/{version}"
        return f"{base}/namespaces/{{namespace}}/{self.plural}"

    @property
    def resource(self) -> str:
        """`plural.group` as kubectl and RBAC name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


_TRAINING = ("training.kubeflow.org/job-name", "job-name")


def _training(kind: WorkloadKind, plural: str, title: str, versions: tuple[str, ...] = ("v1",)) -> KindSpec:
    return KindSpec(kind=kind, group="kubeflow.org", versions=versions, plural=plural, lookup=PodLookup.LABELS,
                    labels=_TRAINING, owned=True, title=title)


KINDS: dict[WorkloadKind, KindSpec] = {
    WorkloadKind.JOB: KindSpec(kind=WorkloadKind.JOB, group="batch", versions=("v1",), plural="jobs",
                               lookup=PodLookup.LABELS, labels=("batch.kubernetes.io/job-name", "job-name"),
                               owned=True, title="Job"),
    WorkloadKind.JOBSET: KindSpec(kind=WorkloadKind.JOBSET, group="jobset.x-k8s.io", versions=("v1alpha2",),
                                  plural="jobsets", lookup=PodLookup.LABELS,
                                  labels=("jobset.sigs.k8s.io/jobset-name",), title="JobSet"),
    WorkloadKind.PYTORCHJOB: _training(WorkloadKind.PYTORCHJOB, "pytorchjobs", "PyTorchJob"),
    WorkloadKind.AIPERFJOB: KindSpec(kind=WorkloadKind.AIPERFJOB, group="aiperf.nvidia.com", versions=("v1alpha1",),
                                     plural="aiperfjobs", lookup=PodLookup.LABELS,
                                     labels=("aiperf.nvidia.com/job-id",), title="AIPerfJob"),
    WorkloadKind.DEPLOYMENT: KindSpec(kind=WorkloadKind.DEPLOYMENT, group="apps", versions=("v1",),
                                      plural="deployments", lookup=PodLookup.SELECTOR, owned=True, title="Deployment"),
    WorkloadKind.STATEFULSET: KindSpec(kind=WorkloadKind.STATEFULSET, group="apps", versions=("v1",),
                                       plural="statefulsets", lookup=PodLookup.SELECTOR, owned=True,
                                       title="StatefulSet"),
    WorkloadKind.LEADERWORKERSET: KindSpec(kind=WorkloadKind.LEADERWORKERSET, group="leaderworkerset.x-k8s.io",
                                           versions=("v1",), plural="leaderworkersets", lookup=PodLookup.LABELS,
                                           labels=("leaderworkerset.sigs.k8s.io/name",), title="LeaderWorkerSet"),
    WorkloadKind.INFERENCESERVICE: KindSpec(kind=WorkloadKind.INFERENCESERVICE, group="serving.kserve.io",
                                            versions=("v1beta1",), plural="inferenceservices",
                                            lookup=PodLookup.LABELS, labels=("serving.kserve.io/inferenceservice",),
                                            title="InferenceService"),
    WorkloadKind.RAYJOB: KindSpec(kind=WorkloadKind.RAYJOB, group="ray.io", versions=("v1",), plural="rayjobs",
                                  lookup=PodLookup.RAYJOB, title="RayJob"),
    WorkloadKind.RAYCLUSTER: KindSpec(kind=WorkloadKind.RAYCLUSTER, group="ray.io", versions=("v1",),
                                      plural="rayclusters", lookup=PodLookup.LABELS, labels=("ray.io/cluster",),
                                      title="RayCluster"),
    WorkloadKind.MPIJOB: KindSpec(kind=WorkloadKind.MPIJOB, group="kubeflow.org", versions=("v2beta1", "v1"),
                                  plural="mpijobs", lookup=PodLookup.LABELS, labels=_TRAINING[:1], title="MPIJob"),
    WorkloadKind.TFJOB: _training(WorkloadKind.TFJOB, "tfjobs", "TFJob"),
    WorkloadKind.XGBOOSTJOB: _training(WorkloadKind.XGBOOSTJOB, "xgboostjobs", "XGBoostJob"),
    WorkloadKind.PADDLEJOB: _training(WorkloadKind.PADDLEJOB, "paddlejobs", "PaddleJob"),
    WorkloadKind.JAXJOB: _training(WorkloadKind.JAXJOB, "jaxjobs", "JAXJob"),
    WorkloadKind.VOLCANOJOB: KindSpec(kind=WorkloadKind.VOLCANOJOB, group="batch.volcano.sh", versions=("v1alpha1",),
                                      plural="jobs", lookup=PodLookup.LABELS, labels=("volcano.sh/job-name",),
                                      title="Volcano Job"),
    WorkloadKind.CRONJOB: KindSpec(kind=WorkloadKind.CRONJOB, group="batch", versions=("v1",), plural="cronjobs",
                                   lookup=PodLookup.CRONJOB, owned=True, title="CronJob"),
    WorkloadKind.DAEMONSET: KindSpec(kind=WorkloadKind.DAEMONSET, group="apps", versions=("v1",), plural="daemonsets",
                                     lookup=PodLookup.SELECTOR, owned=True, title="DaemonSet"),
    WorkloadKind.REPLICASET: KindSpec(kind=WorkloadKind.REPLICASET, group="apps", versions=("v1",),
                                      plural="replicasets", lookup=PodLookup.SELECTOR, owned=True, title="ReplicaSet"),
    WorkloadKind.POD: KindSpec(kind=WorkloadKind.POD, group="", versions=("v1",), plural="pods",
                               lookup=PodLookup.SELF, title="Pod"),
}
# `namespace/name` tries every kind in the enum's order (batch and training kinds first, then serving, then the
# rest): one GET by name each, skipping a group once the server says it does not serve it.
LOOKUP_ORDER = tuple(WorkloadKind)


def custom(*, group: str, version: str, plural: str, title: str) -> KindSpec:
    """A kind found through discovery (`plural.group` in the id): pods by its selector and owner references."""
    return KindSpec(kind=None, group=group, versions=(version,), plural=plural, lookup=PodLookup.CUSTOM, owned=True,
                    title=title)


def selector_text(selector: Any) -> str:
    """A LabelSelector (matchLabels / matchExpressions) or a selector string as the API's `labelSelector`."""
    if isinstance(selector, str):
        return selector.strip()
    if not isinstance(selector, dict):
        return ""
    terms = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(str(value) for value in expression.get("values") or [])
        if not key:
            continue
        if operator == "In":
            terms.append(f"{key} in ({values})")
        elif operator == "NotIn":
            terms.append(f"{key} notin ({values})")
        elif operator == "Exists":
            terms.append(str(key))
        elif operator == "DoesNotExist":
            terms.append(f"!{key}")
    return ",".join(terms)
