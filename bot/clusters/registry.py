"""The named clusters one bot serves: which cluster an id means, the settings a snapshot of it runs with, and
its own snapshot slots. Built once from the settings (`Clusters.from_settings`) and consulted by diagnose()."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bot.clusters.gate import Gate
from bot.clusters.spec import ClusterSpec, load_specs
from bot.config import Settings
from bot.evidence.report import SnapshotUnavailable
from bot.evidence.targets import InvalidTarget, Platform, Target

MAX_LISTED = 12


class ClusterError(InvalidTarget, SnapshotUnavailable):
    """An id names no usable cluster (unknown, wrong kind, ambiguous); the message lists the clusters."""


class UnknownCluster(ClusterError):
    """No cluster by that name is configured."""


class AmbiguousTarget(ClusterError):
    """The id names no cluster and several of its kind are configured, none the default."""


class ClusterCredentialsMissing(SnapshotUnavailable):
    """The cluster's credentials (a token file) cannot be read."""


def _kind(platform: Platform) -> str:
    return "Kubernetes" if platform is Platform.KUBERNETES else "Slurm"


class Clusters:
    """Every configured cluster by name, in configuration order."""

    def __init__(self, *, specs: Sequence[ClusterSpec], source: str = "", legacy: bool = False) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self.source = source
        self.legacy = legacy  # built from the single-cluster variables: snapshots use the settings as they are
        self._gates = {spec.name: Gate(name=spec.name, limit=spec.max_snapshots) for spec in specs}

    @classmethod
    def from_settings(cls, settings: Settings) -> Clusters:
        """The registry the settings describe; raises ClusterConfigError with what to fix."""
        specs, source = load_specs(settings=settings)
        legacy = settings.clusters_file is None and not (settings.clusters_inline or "").strip()
        return cls(specs=specs, source=source, legacy=legacy)

    # --- lookups ---------------------------------------------------------------------------------------

    @property
    def specs(self) -> tuple[ClusterSpec, ...]:
        """Every cluster, in configuration order."""
        return tuple(self._specs.values())

    @property
    def names(self) -> tuple[str, ...]:
        """Every cluster name, in configuration order."""
        return tuple(self._specs)

    def of(self, platform: Platform) -> tuple[ClusterSpec, ...]:
        """The clusters of one kind."""
        return tuple(spec for spec in self._specs.values() if spec.platform is platform)

    def get(self, name: str) -> ClusterSpec:
        """One cluster by name; UnknownCluster lists the configured ones."""
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownCluster(f"There is no cluster `{_shown(name)}`. Clusters: {self.listing()}.")
        return spec

    def default_for(self, platform: Platform) -> ClusterSpec | None:
        """The cluster an id of this kind means when it names none: the only one, or the one marked default."""
        candidates = self.of(platform)
        if len(candidates) == 1:
            return candidates[0]
        return next((spec for spec in candidates if spec.default), None)

    def gate(self, name: str) -> Gate:
        """The cluster's snapshot slots."""
        return self._gates[self.get(name).name]

    def listing(self, platform: Platform | None = None) -> str:
        """`prod-east (Kubernetes), slurm-a (Slurm)`, bounded, for error messages."""
        specs = self.of(platform) if platform else self.specs
        shown = [f"{spec.name} ({_kind(spec.platform)})" for spec in specs[:MAX_LISTED]]
        more = len(specs) - len(shown)
        return (", ".join(shown) or "none") + (f" and {more} more (`triage-bot clusters`)" if more > 0 else "")

    # --- which cluster an id means ----------------------------------------------------------------------

    def spec_for(self, target: Target, *, prefer: str | None = None) -> ClusterSpec:
        """The cluster a target means: the one it names, else the only or preferred (channel default, the
        incident's own) or configured default one of its kind; ClusterError otherwise."""
        if target.cluster:
            spec = self.get(target.cluster)
            if spec.platform is not target.platform:
                raise ClusterError(
                    f"`{spec.name}` is a {_kind(spec.platform)} cluster, and `{target.key}` is a "
                    f"{_kind(target.platform)} id. {_kind(target.platform)} clusters: "
                    f"{self.listing(target.platform)}.")
            return spec
        candidates = self.of(target.platform)
        if not candidates:
            raise ClusterError(f"No {_kind(target.platform)} cluster is configured, so `{target.key}` cannot be "
                               f"read. Clusters: {self.listing()}.")
        preferred = self._specs.get(prefer or "")
        if len(candidates) > 1 and preferred is not None and preferred.platform is target.platform:
            return preferred
        chosen = self.default_for(target.platform)
        if chosen is not None:
            return chosen
        examples = " or ".join(f"`{dataclasses.replace(target, cluster=spec.name).key}`" for spec in candidates[:2])
        raise AmbiguousTarget(
            f"`{target.key}` could be on any of {len(candidates)} {_kind(target.platform)} clusters: "
            f"{', '.join(spec.name for spec in candidates[:MAX_LISTED])}. Name one ({examples}), or set this "
            f"channel's default with `/triage config cluster <name>`.")

    def resolve(self, target: Target, *, prefer: str | None = None) -> Target:
        """The target with its cluster decided, in canonical form (see `canonical`)."""
        spec = self.spec_for(target, prefer=prefer)
        return self.canonical(dataclasses.replace(target, cluster=spec.name))

    def canonical(self, target: Target) -> Target:
        """The cluster is shown only where it tells something: with one cluster of the kind, ids stay as they
        were typed before clusters had names (`ml/train`, `slurm:88123`)."""
        if target.cluster and len(self.of(target.platform)) == 1 and self._specs.get(target.cluster):
            return dataclasses.replace(target, cluster=None)
        return target

    def name_for(self, target: Target, *, prefer: str | None = None) -> str:
        """The concrete cluster name of a target (resolved, canonical or stored)."""
        return self.spec_for(target, prefer=prefer).name

    # --- what a snapshot of one cluster runs with -------------------------------------------------------

    def settings_for(self, spec: ClusterSpec, settings: Settings) -> Settings:
        """The settings a snapshot of this cluster runs with: its access, bounds, Prometheus and probes."""
        if self.legacy:
            return settings
        update: dict[str, object] = {"bounds": spec.bounds_over(settings.bounds)}
        if spec.prometheus_url:
            update["prometheus_url"] = spec.prometheus_url
        if not spec.node_probes:
            update["node_probe_runner"] = "off"
        if spec.kubernetes is not None:
            update.update(kubeconfig=spec.kubernetes.kubeconfig, kube_context=spec.kubernetes.context,
                          in_cluster=spec.kubernetes.in_cluster)
        if spec.slurm is not None:
            update.update(slurm_backend=spec.slurm.backend, slurm_cluster=spec.slurm.cluster,
                          slurm_rest_url=spec.slurm.url, slurm_rest_user=spec.slurm.user,
                          slurm_rest_token=self._token(spec))
        return settings.model_copy(update=update)

    @staticmethod
    def _token(spec: ClusterSpec) -> str | None:
        access = spec.slurm
        if access is None or access.backend != "rest":
            return None
        if access.token is not None:
            return access.token.get_secret_value()
        if access.token_file is None:
            return None
        try:
            token = access.token_file.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ClusterCredentialsMissing(
                f"cluster {spec.name}: cannot read its slurmrestd token file ({error.strerror}); check the "
                f"Secret mounted at {access.token_file}") from None
        return token or None


def _shown(value: str) -> str:
    cleaned = "".join(ch if 32 <= ord(ch) < 127 and ch != "`" else "?" for ch in value)
    return cleaned[:40]
