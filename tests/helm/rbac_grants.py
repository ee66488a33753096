"""Turn RBAC rules into (apiGroup, resource, verb) grants, and Kubernetes API requests into the grant they need."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

READ_VERBS = frozenset({"get", "list", "watch"})
# Namespace subresources the API server treats as such (mirrors apiserver's RequestInfoFactory).
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class Grant:
    """One permission: verb on apiGroup/resource (resource may carry a subresource, e.g. pods/log)."""

    group: str
    resource: str
    verb: str


@dataclass(frozen=True)
class ApiAccess:
    """What one HTTP request to the API server asks for, as RBAC sees it."""

    group: str
    resource: str
    verb: str
    namespace: str | None

    @property
    def grant(self) -> Grant:
        """The namespace-free permission this request needs."""
        return Grant(group=self.group, resource=self.resource, verb=self.verb)


def grants_from_rules(*, rules: Iterable[Mapping[str, Any]]) -> frozenset[Grant]:
    """Expand each rule's apiGroups x resources x verbs; non-resource URL rules grant no resource."""
    grants: set[Grant] = set()
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    grants.add(Grant(group=group, resource=resource, verb=verb))
    return frozenset(grants)


def is_granted(*, grants: frozenset[Grant], needed: Grant) -> bool:
    """Whether the grants allow the request, honouring RBAC's '*' wildcards."""
    for grant in grants:
        if (
            grant.group in ("*", needed.group)
            and grant.resource in ("*", needed.resource)
            and grant.verb in ("*", needed.verb)
        ):
            return True
    return False


def _watch_requested(query: str) -> bool:
    values = parse_qs(query).get("watch", [])
    return any(value.lower() in ("true", "1") for value in values)


def access_for_request(*, method: str, path: str) -> ApiAccess | None:
    """Map a request to (group, resource, verb, namespace); None for discovery/non-resource URLs."""
    split = urlsplit(path)
    parts = [part for part in split.path.split("/") if part]
    if not parts or parts[0] not in ("api", "apis"):
        return None  # /version, /openapi/v2, /healthz: non-resource URLs, covered by system:discovery.
    if parts[0] == "api":
        group, rest = "", parts[2:] if len(parts) >= 2 else []
        if len(parts) < 3:
            return None  # /api, /api/v1: discovery
    else:
        if len(parts) < 4:
            return None  # /apis, /apis/<group>, /apis/<group>/<version>: discovery
        group, rest = parts[1], parts[3:]
    watch = _watch_requested(split.query)
    if rest[0] == "watch":  # legacy /api/v1/watch/... paths
        watch, rest = True, rest[1:]
        if not rest:
            return None
    namespace: str | None = None
    if (
        rest[0] == "namespaces"
        and len(rest) >= 3
        and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES)
    ):
        namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]
    resource, name, subresource = rest[0], (rest[1] if len(rest) > 1 else None), "/".join(rest[2:])
    if subresource:
        resource = f"{resource}/{subresource}"
    verb = _verb(method=method.upper(), has_name=name is not None, watch=watch)
    return ApiAccess(group=group, resource=resource, verb=verb, namespace=namespace)


def _verb(*, method: str, has_name: bool, watch: bool) -> str:
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if has_name else "list"
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    return _METHOD_VERBS.get(method, method.lower())


def ungranted_requests(*, grants: frozenset[Grant], requests: Iterable[tuple[str, str]]) -> list[str]:
    """Each (method, path) the grants do not allow, as 'METHOD path -> group/resource verb', sorted and unique."""
    missing: set[str] = set()
    for method, path in requests:
        access = access_for_request(method=method, path=path)
        if access is not None and not is_granted(grants=grants, needed=access.grant):
            missing.add(
                f"{method} {path.split('?', 1)[0]} -> {access.group or 'core'}/{access.resource} {access.verb}"
            )
    return sorted(missing)
