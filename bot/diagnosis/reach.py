"""Is each named cluster answering, and what may the bot read there (`triage-bot clusters`, `/readyz`).

Kubernetes: GET /version, then SelfSubjectAccessReview per read the collectors make and a
SelfSubjectRulesReview in one namespace. Slurm: `scontrol ping` (`-M` for another cluster) or slurmrestd's
ping with the token, and the controller's PrivateData (what it hides from non-operators). Every cluster is
checked at once, each within its own timeout, so one that hangs delays no other's answer.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
import time
from typing import Any

from bot.clusters.registry import Clusters
from bot.clusters.spec import ClusterSpec
from bot.config import Settings
from bot.evidence.targets import Platform


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterStatus:
    """One cluster as `triage-bot clusters` shows it."""

    name: str
    platform: str
    access: str
    default: bool
    reachable: bool
    detail: str
    version: str = ""
    permissions: tuple[dict[str, Any], ...] = ()
    rules_namespace: str = ""
    rules: tuple[dict[str, Any], ...] = ()
    rules_incomplete: bool = False
    notes: tuple[str, ...] = ()
    elapsed_ms: int = 0

    @property
    def readable(self) -> tuple[str, ...]:
        """The reads the API server allows (everywhere, or in the namespace asked)."""
        return tuple(item["read"] for item in self.permissions if item["allowed"])

    @property
    def refused(self) -> tuple[str, ...]:
        """The reads it refuses."""
        return tuple(item["read"] for item in self.permissions if not item["allowed"])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (`triage-bot clusters --format json`)."""
        return dataclasses.asdict(self)


def check_all(*, clusters: Clusters, settings: Settings, timeout: float, namespace: str | None = None,
              permissions: bool = True) -> list[ClusterStatus]:
    """Every cluster checked concurrently; one that never answers is reported unreachable after `timeout`."""
    specs = clusters.specs
    _import_clients(specs)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(specs)), thread_name_prefix="reach")
    try:
        futures = {spec.name: pool.submit(check_one, spec=spec, clusters=clusters, settings=settings,
                                          timeout=timeout, namespace=namespace, permissions=permissions)
                   for spec in specs}
        deadline = time.monotonic() + timeout * (4 if permissions else 1) + 2
        results = []
        for spec in specs:
            try:
                results.append(futures[spec.name].result(timeout=max(0.0, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                results.append(_status(spec, clusters=clusters, reachable=False,
                                       detail=f"no answer within {timeout:g} s"))
        return results
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _import_clients(specs: tuple[ClusterSpec, ...]) -> None:
    """Import the client libraries here, once: two threads importing `requests` at once can see it half-built."""
    if any(spec.platform is Platform.KUBERNETES for spec in specs):
        from bot.diagnosis.collectors.kube import access, calls  # noqa: F401
    if any(spec.platform is Platform.SLURM for spec in specs):
        from bot.diagnosis.collectors.slurm import collector  # noqa: F401


def check_one(*, spec: ClusterSpec, clusters: Clusters, settings: Settings, timeout: float,
              namespace: str | None = None, permissions: bool = True) -> ClusterStatus:
    """One cluster's reachability and (when asked) permissions; never raises."""
    started = time.monotonic()
    try:
        narrowed = clusters.settings_for(spec, settings)
        if spec.platform is Platform.KUBERNETES:
            status = _kubernetes(spec, clusters=clusters, settings=narrowed, timeout=timeout, namespace=namespace,
                                 permissions=permissions)
        else:
            status = _slurm(spec, clusters=clusters, settings=narrowed, timeout=timeout, permissions=permissions)
    except Exception as error:  # noqa: BLE001 - a check reports, it never takes the listing down
        status = _status(spec, clusters=clusters, reachable=False, detail=f"{type(error).__name__}: {error}"[:300])
    return dataclasses.replace(status, elapsed_ms=int((time.monotonic() - started) * 1000))


def _status(spec: ClusterSpec, *, clusters: Clusters, **fields: Any) -> ClusterStatus:
    return ClusterStatus(name=spec.name, platform=spec.platform.value, access=spec.describe(),
                         default=clusters.default_for(spec.platform) is spec, **fields)


def _kubernetes(spec: ClusterSpec, *, clusters: Clusters, settings: Settings, timeout: float,
                namespace: str | None, permissions: bool) -> ClusterStatus:
    from bot.diagnosis.collectors.kube import access
    from bot.diagnosis.collectors.kube.calls import build_api_client

    try:
        api = build_api_client(kubeconfig=settings.kubeconfig, context=settings.kube_context,
                               in_cluster=settings.in_cluster, pool_size=2)
    except Exception as error:  # noqa: BLE001 - missing or broken kubeconfig: say so
        return _status(spec, clusters=clusters, reachable=False, detail=f"no Kubernetes credentials: {error}"[:300])
    try:
        found = access.check(api=api, timeout=timeout, namespace=namespace, permissions=permissions)
    finally:
        api.close()
    return _status(spec, clusters=clusters, reachable=found.reachable, detail=found.detail, version=found.version,
                   permissions=tuple(item.to_dict() for item in found.permissions),
                   rules_namespace=found.rules_namespace, rules=found.rules, rules_incomplete=found.rules_incomplete)


def _slurm(spec: ClusterSpec, *, clusters: Clusters, settings: Settings, timeout: float,
           permissions: bool) -> ClusterStatus:
    from bot.diagnosis.collectors.slurm import collector as slurm

    bounded = settings.model_copy(update={"bounds": settings.bounds.model_copy(
        update={"call_timeout_seconds": min(timeout, settings.bounds.call_timeout_seconds)})})
    try:
        backend = slurm.make_backend(settings=bounded)
    except ValueError as error:
        return _status(spec, clusters=clusters, reachable=False, detail=f"off: {error}")
    ping = backend.ping()
    if ping.data is None:
        return _status(spec, clusters=clusters, reachable=False, detail=f"unreachable: {ping.error}"[:300])
    version = backend.version().data or ""
    notes: list[str] = []
    if permissions:
        private = backend.private_data()
        if private.data and private.data.lower() != "none":
            notes.append(f"PrivateData={private.data}: Slurm hides those from users who are not operators; "
                         "run the bot as an operator (or SlurmUser) to read every job")
        elif private.data:
            notes.append("PrivateData=none: every job, partition and node is readable")
        if backend.name == "rest":
            notes.append("reads are what the token's user may see")
    return _status(spec, clusters=clusters, reachable=True, detail="ok", version=version,
                   notes=tuple(notes))


class ReachabilityCache:
    """The clusters' reachability for `/readyz` and the metrics, re-checked at most every `ttl_seconds`."""

    def __init__(self, *, clusters: Clusters, settings: Settings, timeout: float = 3.0,
                 ttl_seconds: float = 30.0) -> None:
        self._clusters = clusters
        self._settings = settings
        self._timeout = timeout
        self._ttl = ttl_seconds
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()
        self._checked_at = 0.0
        self._last: list[ClusterStatus] = []

    def statuses(self) -> list[ClusterStatus]:
        """The last check; the first call checks now, a stale one starts a re-check in the background (a
        readiness probe never waits on a cluster that hangs, except the very first time)."""
        with self._lock:
            last, fresh = list(self._last), time.monotonic() - self._checked_at < self._ttl
        if last and fresh:
            return last
        if not last:
            with self._refreshing:
                with self._lock:
                    if self._last:
                        return list(self._last)
                self._refresh()
            return self.last()
        if self._refreshing.acquire(blocking=False):
            threading.Thread(target=self._refresh_then_release, name="reach-refresh", daemon=True).start()
        return last

    def _refresh_then_release(self) -> None:
        try:
            self._refresh()
        finally:
            self._refreshing.release()

    def _refresh(self) -> None:
        found = check_all(clusters=self._clusters, settings=self._settings, timeout=self._timeout,
                          permissions=False)
        with self._lock:
            self._last, self._checked_at = found, time.monotonic()

    def last(self) -> list[ClusterStatus]:
        """The last check without starting one (for a metrics scrape)."""
        with self._lock:
            return list(self._last)
