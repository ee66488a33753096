"""A local Kubernetes API server stand-in that speaks the wire format, so the real client and kubectl can be tested.

It serves discovery, get/list (label and field selectors, limit/continue paging, resourceVersion), `as=Table`
responses for kubectl, pod logs (tailLines, limitBytes, previous), Status errors, and injectable faults. It is
read-only and binds loopback only.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from bot.lab import rbac, tables


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceType:
    """One served resource: where it lives in the API and how discovery describes it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        """`v1` for core, `group/version` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version


CORE_TYPES = (
    ResourceType(group="", version="v1", plural="pods", kind="Pod", short_names=("po",), categories=("all",)),
    ResourceType(group="", version="v1", plural="nodes", kind="Node", namespaced=False, short_names=("no",)),
    ResourceType(group="", version="v1", plural="events", kind="Event", short_names=("ev",)),
    ResourceType(group="", version="v1", plural="namespaces", kind="Namespace", namespaced=False,
                 short_names=("ns",)),
    ResourceType(group="", version="v1", plural="services", kind="Service", short_names=("svc",)),
    ResourceType(group="", version="v1", plural="endpoints", kind="Endpoints", short_names=("ep",)),
    ResourceType(group="", version="v1", plural="resourcequotas", kind="ResourceQuota", short_names=("quota",)),
    ResourceType(group="batch", version="v1", plural="jobs", kind="Job", categories=("all",)),
    ResourceType(group="batch", version="v1", plural="cronjobs", kind="CronJob", short_names=("cj",),
                 categories=("all",)),
    ResourceType(group="apps", version="v1", plural="deployments", kind="Deployment", short_names=("deploy",),
                 categories=("all",)),
    ResourceType(group="apps", version="v1", plural="replicasets", kind="ReplicaSet", short_names=("rs",),
                 categories=("all",)),
    ResourceType(group="apps", version="v1", plural="statefulsets", kind="StatefulSet", short_names=("sts",),
                 categories=("all",)),
    ResourceType(group="apps", version="v1", plural="daemonsets", kind="DaemonSet", short_names=("ds",),
                 categories=("all",)),
)
CRD_TYPES = {
    "jobset.x-k8s.io": (ResourceType(group="jobset.x-k8s.io", version="v1alpha2", plural="jobsets", kind="JobSet"),),
    "kubeflow.org": (
        ResourceType(group="kubeflow.org", version="v1", plural="pytorchjobs", kind="PyTorchJob"),
        ResourceType(group="kubeflow.org", version="v1", plural="tfjobs", kind="TFJob"),
        ResourceType(group="kubeflow.org", version="v1", plural="xgboostjobs", kind="XGBoostJob"),
        ResourceType(group="kubeflow.org", version="v1", plural="paddlejobs", kind="PaddleJob"),
        ResourceType(group="kubeflow.org", version="v1", plural="jaxjobs", kind="JAXJob"),
        ResourceType(group="kubeflow.org", version="v2beta1", plural="mpijobs", kind="MPIJob"),
    ),
    "leaderworkerset.x-k8s.io": (
        ResourceType(group="leaderworkerset.x-k8s.io", version="v1", plural="leaderworkersets",
                     kind="LeaderWorkerSet", short_names=("lws",)),
    ),
    "ray.io": (
        ResourceType(group="ray.io", version="v1", plural="rayjobs", kind="RayJob"),
        ResourceType(group="ray.io", version="v1", plural="rayclusters", kind="RayCluster"),
    ),
    "serving.kserve.io": (
        ResourceType(group="serving.kserve.io", version="v1beta1", plural="inferenceservices",
                     kind="InferenceService", short_names=("isvc",)),
    ),
    "batch.volcano.sh": (
        ResourceType(group="batch.volcano.sh", version="v1alpha1", plural="jobs", kind="Job", short_names=("vcjob",)),
    ),
    "karpenter.sh": (
        ResourceType(group="karpenter.sh", version="v1", plural="nodeclaims", kind="NodeClaim", namespaced=False),
    ),
    # A custom resource no table in the bot knows: it is found only as `modelservers.serving.example.com/ns/name`.
    "serving.example.com": (
        ResourceType(group="serving.example.com", version="v1", plural="modelservers", kind="ModelServer"),
    ),
    "aiperf.nvidia.com": (
        ResourceType(group="aiperf.nvidia.com", version="v1alpha1", plural="aiperfjobs", kind="AIPerfJob"),
    ),
    "kueue.x-k8s.io": (
        ResourceType(group="kueue.x-k8s.io", version="v1beta1", plural="workloads", kind="Workload",
                     short_names=("wl",)),
        ResourceType(group="kueue.x-k8s.io", version="v1beta1", plural="localqueues", kind="LocalQueue",
                     short_names=("queue",)),
        ResourceType(group="kueue.x-k8s.io", version="v1beta1", plural="clusterqueues", kind="ClusterQueue",
                     namespaced=False, short_names=("cq",)),
    ),
}


@dataclasses.dataclass(kw_only=True)
class Fault:
    """An injected failure or delay for requests whose path matches `pattern`."""

    pattern: re.Pattern[str]
    status: int = 0
    latency_seconds: float = 0.0
    remaining: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """One request the server answered, for tests and the benchmark to count."""

    method: str
    path: str
    query: str
    status: int
    bytes_sent: int


class ClusterState:
    """The objects and logs one lab cluster holds, indexed for the lookups the API serves."""

    def __init__(self, *, crd_groups: Iterable[str] = tuple(CRD_TYPES)) -> None:
        self.types: list[ResourceType] = list(CORE_TYPES)
        for group in crd_groups:
            self.types.extend(CRD_TYPES[group])
        self._by_plural = {(rt.group, rt.plural): rt for rt in self.types}
        self._objects: dict[tuple[str, str], dict[str, dict[str, dict[str, Any]]]] = {}
        self._sorted: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        self._events_by_name: dict[str, list[dict[str, Any]]] = {}
        self.logs: dict[tuple[str, str, str, bool], str] = {}
        self.resource_version = 1000
        self.created = datetime.now(UTC)
        self.rbac = rbac.Rbac()  # what the bot's identity may read here (read-everything until narrowed)

    def served_resources(self) -> list[tuple[str, str]]:
        """(group, resource) RBAC can name on this cluster, `pods/log` included."""
        return [(rt.group, rt.plural) for rt in self.types] + [("", "pods/log")]

    def deny(self, *, group: str, resource: str) -> None:
        """Stop granting the bot one resource (e.g. `pods/log`): reads get 403 and reviews say so."""
        self.rbac.revoke(group=group, resource=resource, served=self.served_resources())

    def resource_type(self, *, group: str, plural: str) -> ResourceType | None:
        """The served type, or None when this cluster does not serve it."""
        return self._by_plural.get((group, plural))

    def add(self, obj: dict[str, Any]) -> None:
        """Store one object; apiVersion and kind decide where it is served."""
        group, _, _version = obj["apiVersion"].rpartition("/")
        plural = _plural_for(kind=obj["kind"], types=self.types, group=group)
        self.resource_version += 1
        meta = obj["metadata"]
        meta.setdefault("resourceVersion", str(self.resource_version))
        namespace = meta.get("namespace", "")
        self._objects.setdefault((group, plural), {}).setdefault(namespace, {})[meta["name"]] = obj
        if plural == "events" and not group:
            self._events_by_name.setdefault(obj["involvedObject"]["name"], []).append(obj)
        self._sorted.clear()

    def add_log(self, *, namespace: str, pod: str, container: str, text: str, previous: bool = False) -> None:
        """Store one container's log (current or previous instance)."""
        self.logs[(namespace, pod, container, previous)] = text

    def get(self, *, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One object by name."""
        return self._objects.get((group, plural), {}).get(namespace, {}).get(name)

    def listing(self, *, group: str, plural: str, namespace: str | None) -> list[dict[str, Any]]:
        """All objects of a type in one namespace (or all), in a stable order for paging."""
        key = (group, plural, namespace or "*")
        cached = self._sorted.get(key)
        if cached is None:
            by_namespace = self._objects.get((group, plural), {})
            spaces = [namespace] if namespace is not None else sorted(by_namespace)
            cached = [by_namespace[ns][n] for ns in spaces for n in sorted(by_namespace.get(ns, {}))]
            self._sorted[key] = cached
        return cached

    def events_about(self, *, name: str) -> list[dict[str, Any]]:
        """Events whose involvedObject.name is `name`: the index a real server gets from its field selector."""
        return self._events_by_name.get(name, [])

    def count(self, *, group: str, plural: str) -> int:
        """How many objects of a type exist."""
        return sum(len(items) for items in self._objects.get((group, plural), {}).values())


def _plural_for(*, kind: str, types: Iterable[ResourceType], group: str) -> str:
    for rt in types:
        if rt.kind == kind and rt.group == group:
            return rt.plural
    raise ValueError(f"this lab does not serve {group or 'core'} kind {kind}")


def _lookup(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    return "" if value is None else str(value)


def parse_field_selector(text: str) -> list[tuple[str, str, bool]]:
    """`a=b,c!=d` -> [(path, value, equal)]."""
    terms = []
    for raw in filter(None, (item.strip() for item in text.split(","))):
        if "!=" in raw:
            path, value = raw.split("!=", 1)
            terms.append((path.strip(), value.strip(), False))
        else:
            path, value = raw.replace("==", "=").split("=", 1)
            terms.append((path.strip(), value.strip(), True))
    return terms


def _split_terms(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return [term.strip() for term in terms if term.strip()]


def parse_label_selector(text: str) -> list[tuple[str, str, frozenset[str]]]:
    """`a=b,c!=d,e in (x,y),f,!g` -> [(key, op, values)] with op one of in, notin, exists, missing."""
    terms = []
    for term in _split_terms(text):
        match = re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", term)
        if match:
            terms.append((match.group(1), match.group(2),
                          frozenset(v.strip() for v in match.group(3).split(","))))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key.strip(), "notin", frozenset({value.strip()})))
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append((key.strip(), "in", frozenset({value.strip()})))
        elif term.startswith("!"):
            terms.append((term[1:].strip(), "missing", frozenset()))
        else:
            terms.append((term, "exists", frozenset()))
    return terms


def label_matcher(text: str) -> Callable[[dict[str, str]], bool]:
    """Compile a label selector into a predicate on an object's labels."""
    terms = parse_label_selector(text)

    def matches(labels: dict[str, str]) -> bool:
        for key, op, values in terms:
            present = key in labels
            if op == "exists" and not present or op == "missing" and present:
                return False
            if op == "in" and labels.get(key) not in values or op == "notin" and labels.get(key) in values:
                return False
        return True

    return matches


def _encode_continue(*, offset: int, resource_version: str) -> str:
    raw = json.dumps({"o": offset, "rv": resource_version}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> int:
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["o"])
    except (ValueError, KeyError, TypeError):
        raise _ApiError(400, "BadRequest", "continue key is not valid") from None


class _ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}


def status_object(*, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict:
    """A metav1.Status body, as the real server sends for every error."""
    body: dict[str, Any] = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    }
    if details:
        body["details"] = details
    return body


REVIEW_GROUP = "authorization.k8s.io"
_AUTHORIZATION_GROUP = {"name": REVIEW_GROUP, "versions": [{"groupVersion": f"{REVIEW_GROUP}/v1", "version": "v1"}],
                        "preferredVersion": {"groupVersion": f"{REVIEW_GROUP}/v1", "version": "v1"}}
_AUTHORIZATION_RESOURCES = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{REVIEW_GROUP}/v1",
    "resources": [{"name": name, "singularName": "", "namespaced": False, "kind": kind, "verbs": ["create"]}
                  for name, kind in (("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
                                     ("selfsubjectrulesreviews", "SelfSubjectRulesReview"))],
}

_NAMED_PATH = re.compile(
    r"^/(?:api/(?P<cv>v1)|apis/(?P<group>[^/]+)/(?P<gv>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


class KubeApiServer:
    """Serve one ClusterState on 127.0.0.1:<ephemeral port> in a background thread."""

    def __init__(self, *, state: ClusterState) -> None:
        self.state = state
        self.faults: list[Fault] = []
        self.requests: list[RequestRecord] = []
        self._lock = threading.Lock()
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # stopping never waits on a client that keeps its connection open
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL for kubeconfig and clients."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> KubeApiServer:
        """Serve in a daemon thread; returns self for chaining."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="lab-kube-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (if started) and close the socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def inject(self, *, path_pattern: str, status: int = 0, latency_seconds: float = 0.0,
               times: int | None = None) -> Fault:
        """Make matching requests fail with `status` and/or wait `latency_seconds` (for `times` requests)."""
        fault = Fault(pattern=re.compile(path_pattern), status=status, latency_seconds=latency_seconds,
                      remaining=times)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        with self._lock:
            self.faults.clear()

    def reset_log(self) -> None:
        """Forget the request log."""
        with self._lock:
            self.requests.clear()

    def bytes_sent(self) -> int:
        """Total response bytes so far."""
        with self._lock:
            return sum(record.bytes_sent for record in self.requests)

    def kubeconfig_text(self, *, context: str = "lab") -> str:
        """A kubeconfig pointing at this server (plain http on loopback, no credentials)."""
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        }, indent=2)

    def write_kubeconfig(self, *, path: Path, context: str = "lab") -> Path:
        """Write the kubeconfig and return its path."""
        path.write_text(self.kubeconfig_text(context=context), encoding="utf-8")
        return path

    def _fault_for(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.pattern.search(path) and (fault.remaining is None or fault.remaining > 0):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                    return fault
        return None

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self.requests.append(record)

    # ---- request routing -------------------------------------------------------------------------

    def respond(self, *, path: str, query: dict[str, list[str]], accept: str) -> tuple[int, str, bytes]:
        """Answer one GET: (status, content type, body)."""
        fault = self._fault_for(path)
        if fault is not None:
            if fault.latency_seconds:
                time.sleep(fault.latency_seconds)
            if fault.status:
                reason = {403: "Forbidden", 404: "NotFound", 429: "TooManyRequests"}.get(
                    fault.status, "InternalError")
                message = (f'{path} is forbidden: User "system:serviceaccount:triage:triage-bot" cannot '
                           f"get resource at this path" if fault.status == 403 else "injected failure")
                return _json(fault.status, status_object(code=fault.status, reason=reason, message=message))
        params = {key: values[-1] for key, values in query.items()}
        try:
            if path in ("/version", "/version/"):
                return _json(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-lab",
                                   "platform": "linux/amd64", "goVersion": "go1.22", "compiler": "gc",
                                   "gitCommit": "lab", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z"})
            if path.rstrip("/") == "/api":
                return _json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.removeprefix("http://")}]})
            if path.rstrip("/") == "/apis":
                return _json(200, self._group_list())
            if path.rstrip("/") == "/api/v1":
                return _json(200, self._resource_list(group="", version="v1"))
            if path.rstrip("/") == f"/apis/{REVIEW_GROUP}":
                return _json(200, _AUTHORIZATION_GROUP)
            if path.rstrip("/") == f"/apis/{REVIEW_GROUP}/v1":
                return _json(200, _AUTHORIZATION_RESOURCES)
            match = re.fullmatch(r"/apis/([^/]+)/([^/]+)/?", path)
            if match:
                return _json(200, self._resource_list(group=match.group(1), version=match.group(2)))
            match = re.fullmatch(r"/apis/([^/]+)/?", path)
            if match:
                group = self._group(match.group(1))
                return _json(200, group)
            match = _NAMED_PATH.match(path)
            if not match:
                raise _ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._resource(match=match, params=params, accept=accept)
        except _ApiError as exc:
            return _json(exc.code, status_object(code=exc.code, reason=exc.reason, message=exc.message,
                                                 details=exc.details))

    def review(self, *, path: str, body: bytes) -> tuple[int, str, bytes]:
        """Answer a SelfSubjectAccessReview or SelfSubjectRulesReview POST from this cluster's RBAC rules."""
        kind = {f"/apis/{REVIEW_GROUP}/v1/selfsubjectaccessreviews": "SelfSubjectAccessReview",
                f"/apis/{REVIEW_GROUP}/v1/selfsubjectrulesreviews": "SelfSubjectRulesReview"}.get(path.rstrip("/"))
        if kind is None:
            return _json(405, status_object(code=405, reason="MethodNotAllowed",
                                            message="the lab API server is read-only"))
        fault = self._fault_for(path)
        if fault is not None:
            if fault.latency_seconds:
                time.sleep(fault.latency_seconds)
            if fault.status:
                return _json(fault.status, status_object(code=fault.status, reason="InternalError",
                                                         message="injected failure"))
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = None
        spec = request.get("spec") if isinstance(request, dict) else None
        if not isinstance(spec, dict):
            return _json(400, status_object(code=400, reason="BadRequest", message="the review has no spec object"))
        answer = self.state.rbac.access_review(spec) if kind == "SelfSubjectAccessReview" else \
            self.state.rbac.rules_review(spec)
        return _json(201, {"kind": kind, "apiVersion": f"{REVIEW_GROUP}/v1", "metadata": {"creationTimestamp": None},
                           "spec": spec, "status": answer})

    def _groups(self) -> dict[str, list[ResourceType]]:
        groups: dict[str, list[ResourceType]] = {}
        for rt in self.state.types:
            if rt.group:
                groups.setdefault(rt.group, []).append(rt)
        return groups

    def _group(self, name: str) -> dict[str, Any]:
        types = self._groups().get(name)
        if not types:
            raise _ApiError(404, "NotFound", "the server could not find the requested resource")
        version = {"groupVersion": types[0].group_version, "version": types[0].version}
        return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": [version],
                "preferredVersion": version}

    def _group_list(self) -> dict[str, Any]:
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [self._group(name) for name in sorted(self._groups())] + [_AUTHORIZATION_GROUP]}

    def _resource_list(self, *, group: str, version: str) -> dict[str, Any]:
        types = [rt for rt in self.state.types if rt.group == group and rt.version == version]
        if not types:
            raise _ApiError(404, "NotFound", "the server could not find the requested resource")
        resources = []
        for rt in types:
            resources.append({
                "name": rt.plural, "singularName": rt.kind.lower(), "namespaced": rt.namespaced, "kind": rt.kind,
                "verbs": ["get", "list"], "shortNames": list(rt.short_names), "categories": list(rt.categories),
            })
            if rt.plural == "pods":
                resources.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                                  "verbs": ["get"]})
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": types[0].group_version,
                "resources": resources}

    def _resource(self, *, match: re.Match[str], params: dict[str, str], accept: str) -> tuple[int, str, bytes]:
        group = match.group("group") or ""
        version = match.group("cv") or match.group("gv")
        namespace, plural, name, sub = match.group("ns"), match.group("plural"), match.group("name"), match.group("sub")
        _group, resource, verb = rbac.request_access(group=group, plural=plural, name=name, sub=sub)
        if not self.state.rbac.allows(group=group, resource=resource, verb=verb, namespace=namespace or ""):
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            named = f' "{name}"' if name else ""
            raise _ApiError(403, "Forbidden", f'{plural}{"." + group if group else ""}{named} '
                            f'is forbidden: User "{rbac.SUBJECT}" cannot {verb} resource "{resource}" in API group '
                            f'"{group}"{where}', {"kind": plural, **({"name": name} if name else {})})
        rt = self.state.resource_type(group=group, plural=plural)
        if rt is None or rt.version != version:
            raise _ApiError(404, "NotFound", "the server could not find the requested resource")
        if namespace is None and name and sub is None and rt.namespaced or namespace is not None and not rt.namespaced:
            raise _ApiError(404, "NotFound", "the server could not find the requested resource")
        if name is None:
            return self._list(rt=rt, namespace=namespace, params=params, accept=accept)
        obj = self.state.get(group=group, plural=plural, namespace=namespace or "", name=name)
        if obj is None:
            raise _ApiError(404, "NotFound", f'{plural}{"." + group if group else ""} "{name}" not found',
                            {"name": name, "group": group, "kind": plural})
        if sub == "log" and plural == "pods":
            return 200, "text/plain", self._log(pod=obj, params=params).encode()
        if sub is not None:
            raise _ApiError(404, "NotFound", "the server could not find the requested resource")
        if _wants_table(accept):
            return _json(200, tables.table(rt=rt, items=[obj], include_object=params.get("includeObject"),
                                           resource_version=str(self.state.resource_version), token=""))
        return _json(200, obj)

    def _list(self, *, rt: ResourceType, namespace: str | None, params: dict[str, str],
              accept: str) -> tuple[int, str, bytes]:
        fields = parse_field_selector(params.get("fieldSelector", ""))
        name_terms = [value for path, value, equal in fields if path == "involvedObject.name" and equal]
        if rt.plural == "events" and not rt.group and name_terms:
            items: list[dict[str, Any]] = list(self.state.events_about(name=name_terms[0]))
            if namespace is not None:
                items = [item for item in items if item["metadata"].get("namespace") == namespace]
        else:
            items = self.state.listing(group=rt.group, plural=rt.plural, namespace=namespace)
        if fields:
            items = [item for item in items
                     if all((_lookup(item, path) == value) == equal for path, value, equal in fields)]
        if params.get("labelSelector"):
            matches = label_matcher(params["labelSelector"])
            items = [item for item in items if matches(item["metadata"].get("labels") or {})]
        offset = _decode_continue(params["continue"]) if params.get("continue") else 0
        limit = int(params.get("limit") or 0)
        page = items[offset: offset + limit] if limit > 0 else items[offset:]
        rv = str(self.state.resource_version)
        token = ""
        remaining = 0
        if limit > 0 and offset + limit < len(items):
            token = _encode_continue(offset=offset + limit, resource_version=rv)
            remaining = len(items) - offset - limit
        if _wants_table(accept):
            return _json(200, tables.table(rt=rt, items=page, include_object=params.get("includeObject"),
                                           resource_version=rv, token=token))
        metadata: dict[str, Any] = {"resourceVersion": rv}
        if token:
            metadata["continue"] = token
            metadata["remainingItemCount"] = remaining
        body = {"kind": f"{rt.kind}List", "apiVersion": rt.group_version, "metadata": metadata, "items": page}
        return _json(200, body)

    def _log(self, *, pod: dict[str, Any], params: dict[str, str]) -> str:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        containers = [c["name"] for c in pod["spec"]["containers"]]
        init_containers = [c["name"] for c in pod["spec"].get("initContainers") or []]
        container = params.get("container") or (containers[0] if len(containers) == 1 else "")
        if not container:
            raise _ApiError(400, "BadRequest", f"a container name must be specified for pod {name}, "
                                               f"choose one of: [{' '.join(containers)}]")
        if container not in containers + init_containers:
            raise _ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        previous = params.get("previous", "false").lower() == "true"
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        statuses = statuses + ((pod.get("status") or {}).get("initContainerStatuses") or [])
        status = next((item for item in statuses if item.get("name") == container), None)
        waiting = ((status or {}).get("state") or {}).get("waiting")
        never_started = status is None or waiting is not None and not (status.get("lastState") or {}).get("terminated")
        if never_started and not previous:
            # What the kubelet answers for a container that has never run (no log file exists yet).
            reason = {"ImagePullBackOff": "trying and failing to pull image",
                      "ErrImagePull": "trying and failing to pull image"}.get((waiting or {}).get("reason", ""),
                                                                             (waiting or {}).get("reason") or "")
            raise _ApiError(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: '
                                               f"{reason or 'PodInitializing'}")
        text = self.state.logs.get((namespace, name, container, previous))
        if text is None:
            if previous:
                raise _ApiError(400, "BadRequest", f'previous terminated container "{container}" in pod '
                                                   f'"{name}" not found')
            text = ""
        if params.get("tailLines"):
            lines = text.splitlines(keepends=True)
            keep = int(params["tailLines"])
            text = "".join(lines[-keep:]) if keep > 0 else ""
        if params.get("limitBytes"):
            text = text.encode()[: int(params["limitBytes"])].decode(errors="ignore")
        return text


def _wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _json(status: int, body: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(body, separators=(",", ":")).encode()


def _make_handler(server: KubeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            status, content_type, body = server.respond(
                path=parts.path, query=parse_qs(parts.query), accept=self.headers.get("Accept", ""))
            # Record before answering, so a client that has its answer always finds it in the log.
            server._record(RequestRecord(method="GET", path=parts.path, query=parts.query, status=status,
                                         bytes_sent=len(body)))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            length = min(int(self.headers.get("Content-Length") or 0), 65_536)
            status, content_type, body = server.review(path=parts.path, body=self.rfile.read(length))
            server._record(RequestRecord(method="POST", path=parts.path, query=parts.query, status=status,
                                         bytes_sent=len(body)))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self) -> None:
            body = json.dumps(status_object(code=405, reason="MethodNotAllowed",
                                            message="the lab API server is read-only")).encode()
            self.send_response(405)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_PUT = do_PATCH = do_DELETE = _refuse

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
