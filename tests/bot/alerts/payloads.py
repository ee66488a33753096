"""Alertmanager webhook payloads (version 4) as Alertmanager 0.25 sends them, for the alert tests."""

from __future__ import annotations

import hashlib
from typing import Any

STARTS = "2026-03-01T10:00:00.123456789Z"
ZERO = "0001-01-01T00:00:00Z"


def alert(*, labels: dict[str, str], status: str = "firing", annotations: dict[str, str] | None = None,
          starts: str = STARTS, ends: str = ZERO, generator: str = "http://prometheus:9090/graph?g0.expr=up") -> dict[str, Any]:
    """One alert; its fingerprint is derived from its labels, as Alertmanager's is."""
    fingerprint = hashlib.sha256(repr(sorted(labels.items())).encode()).hexdigest()[:16]
    return {"status": status, "labels": labels, "annotations": annotations or {}, "startsAt": starts, "endsAt": ends,
            "generatorURL": generator, "fingerprint": fingerprint}


def notification(*alerts: dict[str, Any], receiver: str = "triage-bot", group_key: str = "{}:{alertname=\"x\"}",
                 external: str = "http://alertmanager:9093") -> dict[str, Any]:
    """One webhook call carrying `alerts`."""
    status = "firing" if any(item["status"] == "firing" for item in alerts) else "resolved"
    return {"version": "4", "groupKey": group_key, "truncatedAlerts": 0, "status": status, "receiver": receiver,
            "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": external,
            "alerts": list(alerts)}


def pod_storm(*, count: int, job: str = "train-llm", namespace: str = "ml", status: str = "firing",
              ends: str = ZERO) -> list[dict[str, Any]]:
    """`count` KubePodCrashLooping alerts for the pods of one Job (kube-state-metrics labels)."""
    return [alert(labels={"alertname": "KubePodCrashLooping", "severity": "warning", "namespace": namespace,
                          "pod": f"{job}-{index}-x{index:04d}", "container": "trainer", "job_name": job},
                  annotations={"summary": f"Pod {namespace}/{job}-{index} is crash looping",
                               "runbook_url": "https://runbooks.example/KubePodCrashLooping"},
                  status=status, ends=ends)
            for index in range(count)]


def xid(*, node: str = "gpu-node-05", gpu: str = "3", status: str = "firing", ends: str = ZERO) -> dict[str, Any]:
    """dcgm-exporter's Xid series as an alert (Hostname, gpu, UUID, modelName labels)."""
    return alert(labels={"alertname": "DCGMXidErrors", "severity": "critical", "Hostname": node, "gpu": gpu,
                         "UUID": f"GPU-{gpu}c1e0e5a-7b9c-4f5e-9d7e-1a2b3c4d5e6f", "modelName": "NVIDIA H100 80GB HBM3",
                         "namespace": "ml", "pod": "train-llm-trainer-0-0-x0k2p"},
                 annotations={"summary": f"GPU {gpu} on {node} reported Xid 79",
                              "description": "NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus"},
                 status=status, ends=ends)


RULES = """
channel: C0ALERTS
storm_guard: {max_new_incidents: 3, window_minutes: 10}
rules:
  - name: gpu-hardware
    match: {alertname: DCGMXidErrors}
    action: open
    severity: critical
    target: node
  - name: workloads
    match_re: {alertname: "KubePodCrashLooping|KubeJobFailed"}
    action: open
    severity: high
    channel: C0MLOPS
  - name: info-only
    match: {severity: info}
    action: record
"""
