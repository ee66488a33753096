"""Several lab clusters at once, named, behind one bot: the TRIAGE_CLUSTERS document that points at them."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.lab import scenarios
from bot.lab.kube_api import KubeApiServer


@contextlib.contextmanager
def lab_clusters(*, tmp_path: Path, scenarios_by_name: dict[str, str]) -> Iterator[dict[str, KubeApiServer]]:
    """One lab API server per name, each serving its own scenario, all alive for the block."""
    with contextlib.ExitStack() as stack:
        servers = {}
        for name, scenario in scenarios_by_name.items():
            server = stack.enter_context(KubeApiServer(state=scenarios.build(scenario).state))
            server.write_kubeconfig(path=tmp_path / f"kubeconfig-{name}", context=name)
            servers[name] = server
        yield servers


def refusing_kubeconfig(*, tmp_path: Path, name: str) -> Path:
    """A kubeconfig for a cluster whose API server refuses connections (a port nothing listens on)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again when the block ends: connections to it are refused
    path = tmp_path / f"kubeconfig-{name}"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }), encoding="utf-8")
    return path


def kubernetes_entry(*, name: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    """A `clusters:` entry for a lab cluster written by `lab_clusters` (or `refusing_kubeconfig`)."""
    return {"name": name, "kubernetes": {"kubeconfig": str(tmp_path / f"kubeconfig-{name}")}, **extra}


def clusters_document(*entries: dict[str, Any]) -> str:
    """The TRIAGE_CLUSTERS value for these entries."""
    return json.dumps({"clusters": list(entries)})
