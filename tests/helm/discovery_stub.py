"""A loopback API-discovery stand-in: kubectl's client-side dry-run needs discovery to map kinds to resources.

kubectl 1.32 `apply --dry-run=client` (even with --validate=false) asks the server for /api and /apis to
resolve each kind, then GETs each object to decide between create and patch. This serves exactly that: the
discovery documents for the kinds the chart renders, and 404 NotFound for every object, so kubectl reports
"created (dry run)" for each manifest it understood, and fails on an unknown kind or apiVersion.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# group -> version -> [(resource, kind, namespaced)]
KINDS: dict[str, dict[str, list[tuple[str, str, bool]]]] = {
    "": {
        "v1": [
            ("serviceaccounts", "ServiceAccount", True),
            ("services", "Service", True),
            ("persistentvolumeclaims", "PersistentVolumeClaim", True),
            ("pods", "Pod", True),
            ("secrets", "Secret", True),
            ("configmaps", "ConfigMap", True),
            ("namespaces", "Namespace", False),
        ]
    },
    "apps": {"v1": [("deployments", "Deployment", True)]},
    "batch": {"v1": [("jobs", "Job", True)]},
    "policy": {"v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)]},
    "networking.k8s.io": {"v1": [("ingresses", "Ingress", True)]},
    "rbac.authorization.k8s.io": {
        "v1": [
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
        ]
    },
}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _resource_list(group: str, version: str) -> dict[str, Any]:
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {
                "name": name,
                "singularName": kind.lower(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": _VERBS,
            }
            for name, kind, namespaced in KINDS[group][version]
        ],
    }


def _group_list() -> dict[str, Any]:
    groups = []
    for group, versions in KINDS.items():
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{version}", "version": version} for version in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _not_found(path: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"{path} not found",
        "reason": "NotFound",
        "code": 404,
    }


class _Handler(BaseHTTPRequestHandler):
    """Answers discovery; everything else is NotFound; any write is refused (dry-run must never write)."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        self.server.requests.append(("GET", self.path))  # type: ignore[attr-defined]
        parts = [part for part in path.split("/") if part]
        body: dict[str, Any] | None = None
        if parts == ["api"]:
            body = {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
            }
        elif parts == ["apis"]:
            body = _group_list()
        elif parts == ["api", "v1"]:
            body = _resource_list("", "v1")
        elif len(parts) == 3 and parts[0] == "apis" and parts[2] in KINDS.get(parts[1], {}):
            body = _resource_list(parts[1], parts[2])
        elif parts == ["version"]:
            body = {"major": "1", "minor": "32", "gitVersion": "v1.32.0"}
        self._reply(200 if body else 404, body or _not_found(path))

    def _refuse(self) -> None:
        self.server.requests.append((self.command, self.path))  # type: ignore[attr-defined]
        self._reply(
            405,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": 405,
                "reason": "MethodNotAllowed",
                "message": "the discovery stand-in accepts no writes",
            },
        )

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


@contextmanager
def discovery_server(*, kubeconfig: Path) -> Iterator[list[tuple[str, str]]]:
    """Serve discovery on 127.0.0.1:<ephemeral>, write a kubeconfig for it, yield the request log."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "stub",
                "clusters": [{"name": "stub", "cluster": {"server": f"http://{host}:{port}"}}],
                "users": [{"name": "stub", "user": {}}],
                "contexts": [
                    {"name": "stub", "context": {"cluster": "stub", "user": "stub", "namespace": "ops"}}
                ],
            }
        ),
        encoding="utf-8",
    )
    try:
        yield server.requests  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
