"""Is a Kubernetes cluster answering, and what may the bot read there: asked of the API server itself with
SelfSubjectAccessReview (one per read the collectors make) and SelfSubjectRulesReview (the rules in one
namespace), never guessed from the chart."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

REVIEWS = "/apis/authorization.k8s.io/v1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Read:
    """One read the collectors make, as RBAC names it."""

    group: str
    resource: str
    verb: str
    subresource: str = ""
    cluster_scoped: bool = False

    @property
    def label(self) -> str:
        """`list pods`, `get pods/log`, `list jobsets.jobset.x-k8s.io`."""
        name = self.resource + (f"/{self.subresource}" if self.subresource else "")
        return f"{self.verb} {name}{'.' + self.group if self.group else ''}"


# What the snapshot collectors read (the chart's read-only ClusterRole grants exactly these).
READS = (
    Read(group="batch", resource="jobs", verb="get"),
    Read(group="", resource="pods", verb="list"),
    Read(group="", resource="pods", verb="get", subresource="log"),
    Read(group="", resource="events", verb="list"),
    Read(group="", resource="nodes", verb="get", cluster_scoped=True),
    Read(group="jobset.x-k8s.io", resource="jobsets", verb="get"),
    Read(group="kubeflow.org", resource="pytorchjobs", verb="get"),
    Read(group="aiperf.nvidia.com", resource="aiperfjobs", verb="get"),
    Read(group="kueue.x-k8s.io", resource="workloads", verb="list"),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Permission:
    """The API server's answer for one read: allowed everywhere, only in the namespace asked, or not."""

    read: Read
    allowed: bool
    namespace_only: bool = False
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"read": self.read.label, "allowed": self.allowed, "namespace_only": self.namespace_only,
                "reason": self.reason}


@dataclasses.dataclass(frozen=True, kw_only=True)
class KubeAccess:
    """Reachability, version and permissions of one Kubernetes cluster, as its API server states them."""

    reachable: bool
    detail: str
    version: str = ""
    permissions: tuple[Permission, ...] = ()
    rules_namespace: str = ""
    rules: tuple[dict[str, Any], ...] = ()
    rules_incomplete: bool = False


class Unreachable(ConnectionError):
    """The API server did not answer (refused, DNS, TLS, timeout)."""


def _request(api: client.ApiClient, *, method: str, path: str, timeout: float, body: Any = None) -> Any:
    """One call through the client's own transport and auth; JSON back, errors mapped."""
    try:
        request = api.param_serialize(method=method, resource_path=path, body=body,
                                      header_params={"Accept": "application/json",
                                                     **({"Content-Type": "application/json"} if body else {})},
                                      auth_settings=["BearerToken"])
        response = api.call_api(*request, _request_timeout=(min(timeout, 3.0), timeout))
        data = response.read()
    except urllib3.exceptions.MaxRetryError as error:
        raise Unreachable(str(error.reason)[:300]) from None
    except (urllib3.exceptions.HTTPError, TimeoutError, OSError) as error:
        raise Unreachable(f"{type(error).__name__}: {error}"[:300]) from None
    return json.loads(data or b"{}")


def check(*, api: client.ApiClient, timeout: float, namespace: str | None = None,
          permissions: bool = True) -> KubeAccess:
    """GET /version, then (when asked) one SelfSubjectAccessReview per read (all namespaces, and in
    `namespace` for what is refused cluster-wide) and a SelfSubjectRulesReview in `namespace`."""
    try:
        version = _request(api, method="GET", path="/version", timeout=timeout)
    except Unreachable as error:
        return KubeAccess(reachable=False, detail=f"unreachable: {error}")
    except ApiException as error:
        if error.status not in (401, 403):
            return KubeAccess(reachable=False, detail=f"/version: HTTP {error.status} {error.reason}")
        return KubeAccess(reachable=False, detail=f"the API server refused the credentials (HTTP {error.status})")
    shown = str(version.get("gitVersion") or "")
    if not permissions:
        return KubeAccess(reachable=True, detail="ok", version=shown)
    try:
        found = tuple(_permission(api, read=read, namespace=namespace, timeout=timeout) for read in READS)
        rules, incomplete = _rules(api, namespace=namespace or "default", timeout=timeout)
    except Unreachable as error:
        return KubeAccess(reachable=False, detail=f"unreachable during the access review: {error}", version=shown)
    except ApiException as error:
        return KubeAccess(reachable=True, version=shown,
                          detail=f"the access review was refused (HTTP {error.status}): the bot cannot tell what "
                                 "it may read")
    return KubeAccess(reachable=True, detail="ok", version=shown, permissions=found,
                      rules_namespace=namespace or "default", rules=rules, rules_incomplete=incomplete)


def _review(api: client.ApiClient, *, read: Read, namespace: str, timeout: float) -> tuple[bool, str]:
    attributes = {"verb": read.verb, "group": read.group, "resource": read.resource}
    if read.subresource:
        attributes["subresource"] = read.subresource
    if namespace and not read.cluster_scoped:
        attributes["namespace"] = namespace
    answer = _request(api, method="POST", path=f"{REVIEWS}/selfsubjectaccessreviews", timeout=timeout,
                      body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                            "spec": {"resourceAttributes": attributes}})
    status = answer.get("status") or {}
    return bool(status.get("allowed")), str(status.get("reason") or status.get("evaluationError") or "")[:300]


def _permission(api: client.ApiClient, *, read: Read, namespace: str | None, timeout: float) -> Permission:
    allowed, reason = _review(api, read=read, namespace="", timeout=timeout)
    if allowed or not namespace or read.cluster_scoped:
        return Permission(read=read, allowed=allowed, reason=reason)
    in_namespace, reason = _review(api, read=read, namespace=namespace, timeout=timeout)
    return Permission(read=read, allowed=in_namespace, namespace_only=in_namespace, reason=reason)


def _rules(api: client.ApiClient, *, namespace: str, timeout: float) -> tuple[tuple[dict[str, Any], ...], bool]:
    answer = _request(api, method="POST", path=f"{REVIEWS}/selfsubjectrulesreviews", timeout=timeout,
                      body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                            "spec": {"namespace": namespace}})
    status = answer.get("status") or {}
    rules = tuple(dict(rule) for rule in (status.get("resourceRules") or [])[:200] if isinstance(rule, dict))
    return rules, bool(status.get("incomplete"))
