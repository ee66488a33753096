"""Named value sets the chart is rendered with: the configurations operators are told to use."""

from __future__ import annotations

from typing import Any

SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    "http-ingress": {
        "mode": "http",
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "host": "triage.example.org",
            "tlsSecretName": "triage-tls",
        },
    },
    "socket": {"mode": "socket", "existingSecret": "slack-socket"},
    "postgresql-3-replicas": {
        "replicaCount": 3,
        "database": {"type": "postgresql"},
        "existingSecret": "triage-env",
    },
    "namespaced-rbac": {"rbac": {"namespaced": True, "namespaces": ["ml-train", "perf"]}},
}
