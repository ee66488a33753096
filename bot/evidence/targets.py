"""Parse and validate the `<id>` of `/triage job <id>` before anything touches a cluster."""

from __future__ import annotations

import dataclasses
import enum
import re

# DNS-1123 label (namespaces) and subdomain (object names), as the API server enforces them.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SLURM_JOB_ID = re.compile(r"[1-9][0-9]{0,9}(_[0-9]{1,6})?")
# A cluster name: a DNS-1123 label that starts with a letter (so `88123` is never a cluster), 40 chars at most.
CLUSTER_NAME = re.compile(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?")
# `slurm:<n>` keeps meaning "the default Slurm cluster", so no cluster may be called `slurm`.
SLURM_PREFIX = "slurm"
# Id prefixes that are never cluster names: Slurm jobs, and node incidents' stored keys.
RESERVED_PREFIXES = frozenset({SLURM_PREFIX, "node", "slurm-node"})
MAX_ID_LENGTH = 300

# A custom resource the bot has no table entry for: `<plural>.<group>` as kubectl spells it (CRD groups have a dot).
_CUSTOM_RESOURCE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){2,}")


class Platform(enum.StrEnum):
    """Which kind of cluster a target lives on."""

    KUBERNETES = "kubernetes"
    SLURM = "slurm"


class WorkloadKind(enum.StrEnum):
    """Kubernetes workload kinds we resolve to their pods; `namespace/name` tries them in this order."""

    JOB = "job"
    JOBSET = "jobset"
    PYTORCHJOB = "pytorchjob"
    AIPERFJOB = "aiperfjob"
    DEPLOYMENT = "deployment"
    STATEFULSET = "statefulset"
    LEADERWORKERSET = "leaderworkerset"
    INFERENCESERVICE = "inferenceservice"
    RAYJOB = "rayjob"
    RAYCLUSTER = "raycluster"
    MPIJOB = "mpijob"
    TFJOB = "tfjob"
    XGBOOSTJOB = "xgboostjob"
    PADDLEJOB = "paddlejob"
    JAXJOB = "jaxjob"
    VOLCANOJOB = "volcanojob"
    CRONJOB = "cronjob"
    DAEMONSET = "daemonset"
    REPLICASET = "replicaset"
    POD = "pod"


# kubectl's short names, accepted as typed and stored under the full kind.
KIND_ALIASES = {"deploy": WorkloadKind.DEPLOYMENT, "sts": WorkloadKind.STATEFULSET, "lws": WorkloadKind.LEADERWORKERSET,
                "isvc": WorkloadKind.INFERENCESERVICE, "vcjob": WorkloadKind.VOLCANOJOB, "cj": WorkloadKind.CRONJOB,
                "ds": WorkloadKind.DAEMONSET, "rs": WorkloadKind.REPLICASET, "po": WorkloadKind.POD}
_SHORT = {kind: alias for alias, kind in KIND_ALIASES.items()}
ACCEPTED_FORMS = (
    "`namespace/name` (Kubernetes: the common kinds are tried in a fixed order), `kind/namespace/name` with kind one "
    "of " + ", ".join(f"{kind.value}" + (f" ({_SHORT[kind]})" if kind in _SHORT else "") for kind in WorkloadKind)
    + " (e.g. `deployment/serving/vllm`), any other custom resource as `plural.group/namespace/name` "
    "(e.g. `notebooks.kubeflow.org/team/nb-1`), or a Slurm job as a bare number or `slurm:<number>` (e.g. `88123`); "
    "any of them after `<cluster>:` to name the cluster (e.g. `prod-east:ml/train-llm`, `slurm-a:88123`)"
)


class InvalidTarget(ValueError):
    """The id is not one of the accepted forms; the message says what to type instead."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Target:
    """A validated workload reference."""

    platform: Platform
    name: str
    namespace: str | None = None
    kind: WorkloadKind | None = None
    resource: str | None = None  # `plural.group` of a custom resource the bot has no table entry for
    cluster: str | None = None  # None: the platform's default cluster (the only one, when one is configured)

    @property
    def key(self) -> str:
        """Canonical form used to find the open incident for this workload (`<cluster>:` first when named)."""
        if self.platform is Platform.SLURM:
            return f"{self.cluster}:{self.name}" if self.cluster else f"slurm:{self.name}"
        prefix = f"{self.kind.value}/" if self.kind else (f"{self.resource}/" if self.resource else "")
        return f"{self.cluster + ':' if self.cluster else ''}{prefix}{self.namespace}/{self.name}"

    @property
    def workload_key(self) -> str:
        """Kind-independent key: `ns/name` and `job/ns/name` are the same workload for dedup."""
        if self.platform is Platform.SLURM:
            return f"slurm:{self.name}"
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return self.key


def _check_namespace(value: str, *, raw: str) -> str:
    if not _DNS1123_LABEL.fullmatch(value):
        raise InvalidTarget(
            f"`{_shown(raw)}` has an invalid namespace `{_shown(value)}`: namespaces are lowercase "
            f"letters, digits and '-', at most 63 characters. Accepted forms: {ACCEPTED_FORMS}."
        )
    return value


def _check_name(value: str, *, raw: str) -> str:
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(value):
        raise InvalidTarget(
            f"`{_shown(raw)}` has an invalid name `{_shown(value)}`: names are lowercase letters, digits, "
            f"'-' and '.', at most 253 characters. Accepted forms: {ACCEPTED_FORMS}."
        )
    return value


def _shown(value: str) -> str:
    """Echo user input safely: printable ASCII only, bounded length."""
    cleaned = "".join(ch if 32 <= ord(ch) < 127 and ch != "`" else "?" for ch in value)
    return cleaned if len(cleaned) <= 60 else cleaned[:57] + "..."


def parse_target(raw: str) -> Target:
    """Validate one id, with an optional `<cluster>:` in front; raise InvalidTarget otherwise."""
    cluster, text = _split_cluster(raw.strip())
    parsed = _parse_id(text)
    return dataclasses.replace(parsed, cluster=cluster) if cluster else parsed


def _split_cluster(text: str) -> tuple[str | None, str]:
    """`prod-east:ml/x` -> (`prod-east`, `ml/x`); `slurm:88123` and ids without a cluster are left whole."""
    head, colon, rest = text.partition(":")
    if not colon or "/" in head or head.lower() in RESERVED_PREFIXES:
        return None, text
    if len(text) > MAX_ID_LENGTH:
        return None, text  # refused by length in _parse_id, before any pattern runs
    if not head.isascii() or not CLUSTER_NAME.fullmatch(head):
        raise InvalidTarget(
            f"`{_shown(head)}` is not a cluster name: cluster names are lowercase letters, digits and '-', "
            f"starting with a letter, at most 40 characters (`triage-bot clusters` lists them). "
            f"Accepted forms: {ACCEPTED_FORMS}."
        )
    node_key = rest.lower().startswith(("node:", "slurm-node:"))  # a node on a named cluster
    if (":" in rest and not node_key) or rest != rest.lstrip():
        raise InvalidTarget(f"`{_shown(text)}` is not `<cluster>:<id>`. Accepted forms: {ACCEPTED_FORMS}.")
    return head, rest


def _parse_id(raw: str) -> Target:
    """One id without a cluster: which platform and kind it names."""
    text = raw.strip()
    if not text:
        raise InvalidTarget(f"Missing job id. Accepted forms: {ACCEPTED_FORMS}.")
    if len(text) > MAX_ID_LENGTH:
        raise InvalidTarget(f"That id is {len(text)} characters long; ids are at most {MAX_ID_LENGTH}.")
    lowered = text.lower()
    if lowered.startswith(("node:", "slurm-node:")):  # a node incident's stored target (bot.evidence.node_targets)
        from bot.evidence.node_targets import parse_node_target

        return parse_node_target(text)
    # A leading digit means Slurm only without a '/': `42-team/train` is a valid namespace/name.
    if lowered.startswith("slurm:") or text.isascii() and text[:1].isdigit() and "/" not in text:
        number = text.split(":", 1)[1] if lowered.startswith("slurm:") else text
        if not number.isascii() or not _SLURM_JOB_ID.fullmatch(number):
            raise InvalidTarget(
                f"`{_shown(text)}` is not a Slurm job id: use digits, optionally `_<array index>` "
                f"(e.g. `88123` or `slurm:88123_4`). Accepted forms: {ACCEPTED_FORMS}."
            )
        return Target(platform=Platform.SLURM, name=number)
    parts = text.split("/")
    if len(parts) == 2:
        namespace, name = parts
        return Target(
            platform=Platform.KUBERNETES,
            namespace=_check_namespace(namespace, raw=text),
            name=_check_name(name, raw=text),
        )
    if len(parts) == 3:
        kind_text, namespace, name = parts
        lowered_kind = kind_text.lower() if kind_text.isascii() else kind_text
        kind = KIND_ALIASES.get(lowered_kind) or next((k for k in WorkloadKind if k.value == lowered_kind), None)
        resource = (lowered_kind if kind is None and len(lowered_kind) <= 253 and _CUSTOM_RESOURCE.fullmatch(lowered_kind)
                    else None)
        if kind is None and resource is None:
            raise InvalidTarget(
                f"`{_shown(kind_text)}` is not a workload kind we triage. Accepted forms: {ACCEPTED_FORMS}."
            )
        return Target(
            platform=Platform.KUBERNETES,
            kind=kind,
            resource=resource,
            namespace=_check_namespace(namespace, raw=text),
            name=_check_name(name, raw=text),
        )
    raise InvalidTarget(f"`{_shown(text)}` is not a job id we understand. Accepted forms: {ACCEPTED_FORMS}.")
