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
    "alert-intake": {
        "alerts": {
            "enabled": True,
            "routing": {
                "channel": "C0GPUOPS",
                "rules": [
                    {"name": "gpu-hardware", "match": {"alertname": "DCGMXidErrors"}, "action": "open",
                     "severity": "critical", "target": "node"},
                    {"name": "workloads", "match_re": {"alertname": "KubeJobFailed|KubePodCrashLooping"},
                     "action": "open", "severity": "high", "channel": "C0MLOPS"},
                ],
            },
        },
    },
    "many-clusters": {
        "clusters": {
            "inCluster": "local",
            "remote": [
                {"name": "prod-east", "default": True, "kubernetes": {"secretName": "kubeconfig-prod-east",
                                                                      "context": "east"}},
                {"name": "prod-west", "maxSnapshots": 2, "bounds": {"deadline_seconds": 30},
                 "kubernetes": {"secretName": "kubeconfig-prod-west", "key": "config"}},
                {"name": "slurm-b", "slurm": {"url": "https://slurmrestd.b:6820", "tokenSecretName": "slurm-b-jwt",
                                              "user": "triage"}},
            ],
        },
    },
}
