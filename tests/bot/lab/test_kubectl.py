"""The machine's kubectl works against the lab and prints real columns (what a responder would see)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.kube_lab import Lab, running_lab

pytestmark = [pytest.mark.kubectl,
              pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")]


def _kubectl(lab: Lab, tmp_path: Path, *args: str) -> str:
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(lab.kubeconfig), "--cache-dir", str(tmp_path / "cache"), *args],
        capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _header(output: str) -> list[str]:
    return output.splitlines()[0].split()


def test_get_pods_all_namespaces_wide(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="nccl-ib") as lab:
        output = _kubectl(lab, tmp_path, "get", "pods", "-A", "-o", "wide")
    assert _header(output)[:7] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP"]
    row = next(line.split() for line in output.splitlines() if "train-llm-master-0" in line)
    assert row[0] == "ml" and row[3] == "CrashLoopBackOff" and "gpu-node-03" in row


def test_get_events_sorted_by_last_timestamp(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="gpu-xid") as lab:
        output = _kubectl(lab, tmp_path, "get", "events", "-A", "--sort-by=.lastTimestamp")
    assert _header(output) == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("XidError" in line and "node/gpu-node-05" in line for line in output.splitlines())


def test_get_nodes_wide(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy") as lab:
        output = _kubectl(lab, tmp_path, "get", "nodes", "-o", "wide")
    assert _header(output)[:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    assert len(output.splitlines()) == 17
    assert "containerd://1.7.18" in output


def test_describe_pod_shows_state_and_events(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="oom") as lab:
        output = _kubectl(lab, tmp_path, "describe", "pod", "-n", "ml", "train-llm-0-x0k2p")
    assert "OOMKilled" in output and "Exit Code:    137" in output
    assert "Back-off restarting failed container" in output


def test_logs_of_the_previous_container(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="nccl-ib") as lab:
        output = _kubectl(lab, tmp_path, "logs", "-n", "ml", "train-llm-worker-0", "--previous", "--tail=3")
    assert "NCCL WARN NET/IB" in output and "gpu-node-07" in output
    assert len(output.splitlines()) == 3


def test_get_a_custom_resource(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="kueue-quota") as lab:
        output = _kubectl(lab, tmp_path, "get", "workloads.kueue.x-k8s.io", "-n", "ml")
    assert _header(output) == ["NAME", "AGE"] and "job-train-llm-7c1d2" in output
