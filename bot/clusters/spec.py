"""What one named cluster is (a Kubernetes context or a Slurm cluster, with its own bounds), and where the list
comes from: `TRIAGE_CLUSTERS_FILE` (YAML), `TRIAGE_CLUSTERS` (the same inline), or the single-cluster variables.

```yaml
clusters:
  - name: prod-east
    kubernetes: {kubeconfig: /etc/triage/clusters/prod-east/kubeconfig, context: east}
    default: true                # the Kubernetes cluster an id without `<cluster>:` means
    max_snapshots: 4             # snapshots at once against this cluster (others never wait for it)
    bounds: {deadline_seconds: 30}
  - name: local
    kubernetes: {in_cluster: true}
  - name: slurm-a
    slurm: {backend: cli, cluster: a}                        # scontrol/sacct/sinfo -M a
  - name: slurm-b
    slurm: {backend: rest, url: https://slurmrestd.b:6820, token_file: /etc/triage/slurm-b/token}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.config import Settings, SnapshotBounds
from bot.evidence.report import SnapshotUnavailable
from bot.evidence.targets import CLUSTER_NAME, RESERVED_PREFIXES, SLURM_PREFIX, Platform

MAX_CLUSTERS = 64
LEGACY_KUBERNETES = "kubernetes"
LEGACY_SLURM = SLURM_PREFIX
_LEGACY = "legacy"


class ClusterConfigError(ValueError, SnapshotUnavailable):
    """The cluster list cannot be used; the message names the source, the entry and what to fix."""


class KubernetesAccess(BaseModel):
    """A Kubernetes context: a kubeconfig (from a Secret) and context, or the pod's own service account."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kubeconfig: Path | None = None
    context: str | None = None
    in_cluster: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> KubernetesAccess:
        if self.in_cluster and (self.kubeconfig or self.context):
            raise ValueError("in_cluster: true takes no kubeconfig or context")
        return self

    def describe(self) -> str:
        """Where the credentials come from, for `triage-bot clusters`."""
        if self.in_cluster:
            return "in-cluster service account"
        where = str(self.kubeconfig) if self.kubeconfig else "default kubeconfig"
        return where + (f", context {self.context}" if self.context else "")


class SlurmAccess(BaseModel):
    """A Slurm cluster: its own tools on this host (`-M <cluster>` for another cluster), or slurmrestd."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["cli", "rest", "off"] = "cli"
    cluster: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    token_file: Path | None = None
    token: SecretStr | None = None  # only from SLURM_JWT (single-cluster settings), never in a file
    user: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")

    @model_validator(mode="after")
    def _rest_needs_url(self) -> SlurmAccess:
        if self.backend == "rest" and not self.url:
            raise ValueError("backend: rest needs url (and token_file)")
        if self.backend != "rest" and (self.url or self.token_file):
            raise ValueError("url and token_file belong to backend: rest")
        if self.backend == "rest" and self.cluster:
            raise ValueError("cluster (-M) belongs to backend: cli; slurmrestd serves one cluster")
        return self

    def describe(self) -> str:
        """How the bot reads it, for `triage-bot clusters`."""
        if self.backend == "rest":
            return f"slurmrestd {self.url}"
        if self.backend == "off":
            return "off"
        return "scontrol/sacct on this host" + (f" -M {self.cluster}" if self.cluster else "")


class ClusterSpec(BaseModel):
    """One named cluster; exactly one of `kubernetes` and `slurm`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kubernetes: KubernetesAccess | None = None
    slurm: SlurmAccess | None = None
    default: bool = False
    max_snapshots: int = Field(default=4, ge=1, le=64)
    bounds: dict[str, float | int] = Field(default_factory=dict)
    prometheus_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    node_probes: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str, info: ValidationInfo) -> str:
        if not CLUSTER_NAME.fullmatch(value):
            raise ValueError("cluster names are lowercase letters, digits and '-', starting with a letter, "
                             "at most 40 characters")
        if value == SLURM_PREFIX and (info.context or {}).get("source") != _LEGACY:
            raise ValueError("`slurm` is reserved: `slurm:<job>` means the default Slurm cluster")
        if value in RESERVED_PREFIXES - {SLURM_PREFIX}:
            raise ValueError(f"`{value}` is reserved: `{value}:<name>` names a node")
        return value

    @field_validator("bounds")
    @classmethod
    def _bounds(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(SnapshotBounds.model_fields))
        if unknown:
            raise ValueError(f"unknown bounds {', '.join(unknown)}; known: {', '.join(SnapshotBounds.model_fields)}")
        SnapshotBounds.model_validate({**SnapshotBounds.model_construct().model_dump(), **value})
        return value

    @model_validator(mode="after")
    def _one_platform(self) -> ClusterSpec:
        if (self.kubernetes is None) == (self.slurm is None):
            raise ValueError("give exactly one of `kubernetes:` and `slurm:`")
        return self

    @property
    def platform(self) -> Platform:
        """Which kind of cluster this is."""
        return Platform.KUBERNETES if self.kubernetes is not None else Platform.SLURM

    def describe(self) -> str:
        """Its access, in one line."""
        access = self.kubernetes or self.slurm
        return access.describe() if access is not None else ""

    def bounds_over(self, base: SnapshotBounds) -> SnapshotBounds:
        """The deployment's bounds with this cluster's overrides."""
        if not self.bounds:
            return base
        return SnapshotBounds.model_validate({**base.model_dump(), **self.bounds})


def load_specs(*, settings: Settings) -> tuple[tuple[ClusterSpec, ...], str]:
    """(clusters, where they came from); raises ClusterConfigError with what to fix."""
    if settings.clusters_file is not None:
        source = f"TRIAGE_CLUSTERS_FILE={settings.clusters_file}"
        try:
            text = settings.clusters_file.read_text(encoding="utf-8")
        except OSError as error:
            raise ClusterConfigError(f"{source}: cannot read it ({error.strerror})") from None
        return parse_specs(text=text, source=source), source
    if settings.clusters_inline and settings.clusters_inline.strip():
        source = "TRIAGE_CLUSTERS"
        return parse_specs(text=settings.clusters_inline, source=source), source
    return legacy_specs(settings=settings), "KUBECONFIG/TRIAGE_KUBE_CONTEXT/TRIAGE_IN_CLUSTER and TRIAGE_SLURM_*"


def parse_specs(*, text: str, source: str) -> tuple[ClusterSpec, ...]:
    """The `clusters:` list of a YAML (or JSON) document, validated as a whole."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ClusterConfigError(f"{source}: not valid YAML ({str(error)[:200]})") from None
    items = data.get("clusters") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise ClusterConfigError(f"{source}: expected `clusters:` with a list of clusters")
    if len(items) > MAX_CLUSTERS:
        raise ClusterConfigError(f"{source}: {len(items)} clusters; at most {MAX_CLUSTERS}")
    specs = []
    for index, item in enumerate(items):
        label = item.get("name") if isinstance(item, dict) else None
        try:
            specs.append(ClusterSpec.model_validate(item, context={"source": source}))
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}"
                                 for e in error.errors()[:5])
            raise ClusterConfigError(f"{source}: cluster #{index + 1}"
                                     f"{f' ({label})' if isinstance(label, str) else ''}: {problems}") from None
    _check_together(specs, source=source)
    return tuple(specs)


def _check_together(specs: list[ClusterSpec], *, source: str) -> None:
    names = [spec.name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ClusterConfigError(f"{source}: cluster names must be unique; repeated: {', '.join(repeated)}")
    for platform in Platform:
        defaults = [spec.name for spec in specs if spec.platform is platform and spec.default]
        if len(defaults) > 1:
            raise ClusterConfigError(f"{source}: at most one default {platform.value} cluster; "
                                     f"marked: {', '.join(defaults)}")


def legacy_specs(*, settings: Settings) -> tuple[ClusterSpec, ...]:
    """One Kubernetes and one Slurm cluster from the single-cluster variables: nothing changes for users."""
    backend = settings.slurm_backend.strip().lower()
    slurm: dict[str, Any] = {"backend": backend if backend in ("cli", "rest") else "off"}
    if backend == "cli" and settings.slurm_cluster:
        slurm["cluster"] = settings.slurm_cluster
    if backend == "rest" and settings.slurm_rest_url and settings.slurm_rest_token:
        slurm.update(url=settings.slurm_rest_url, token=settings.slurm_rest_token, user=settings.slurm_rest_user)
    elif backend == "rest":
        slurm["backend"] = "off"  # the snapshot says what to set, as it always did (legacy settings pass as-is)
    kubernetes = {"in_cluster": True} if settings.in_cluster else {
        "kubeconfig": settings.kubeconfig, "context": settings.kube_context}
    context = {"source": _LEGACY}
    try:
        return (
            ClusterSpec.model_validate({"name": LEGACY_KUBERNETES, "kubernetes": kubernetes, "node_probes": True},
                                       context=context),
            ClusterSpec.model_validate({"name": LEGACY_SLURM, "slurm": _present(slurm), "node_probes": True},
                                       context=context),
        )
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()[:5])
        raise ClusterConfigError(f"cluster settings: {problems}") from None


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}
