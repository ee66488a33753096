"""`/triage node` on Kubernetes: the real client against the lab API server, one scenario per node failure."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

import pytest

from bot.diagnosis.service import TargetNotFound, diagnose
from bot.evidence.findings import CollectorOutcome
from bot.evidence.node_targets import parse_node_target
from bot.lab import node_scenarios
from tests.support.kube_lab import running_lab

CONFIDENT = 0.7


@pytest.mark.parametrize("name", sorted(node_scenarios.NODE_SCENARIOS))
def test_each_node_scenario_lands_on_its_layer_and_reads_only_that_node(name: str, tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario=name) as lab:
        assert lab.scenario is not None
        report = diagnose(target=lab.scenario.target, settings=lab.settings())
        requests = [(record.path, parse_qs(record.query)) for record in lab.server.requests]
    node = lab.scenario.target.removeprefix("node:")
    layer = report.verdict.layer.value if report.verdict.layer else None
    assert layer == lab.scenario.expected_layer, report.verdict.summary
    if layer is not None:
        assert report.verdict.confidence >= CONFIDENT
    assert report.target == f"node:{node}" and report.target_kind == "node"
    assert {record.outcome for record in report.collectors} <= {CollectorOutcome.OK, CollectorOutcome.SKIPPED}
    # Bounded reads: the node by name, its pods by field selector, its events by involved object; no sweep.
    assert ("/api/v1/nodes", {}) not in requests
    assert f"/api/v1/nodes/{node}" in [path for path, _ in requests]
    pod_lists = [query for path, query in requests if path == "/api/v1/pods"]
    assert pod_lists and all(query["fieldSelector"] == [f"spec.nodeName={node}"] for query in pod_lists)
    assert all(f"involvedObject.name={node}" in query["fieldSelector"][0]
               for path, query in requests if path.endswith("/events"))
    assert len(requests) <= 8
    assert not [item for item in report.observations if "cache-warmer" in item.subject + item.text]


def test_a_healthy_node_gets_no_layer_and_no_next_steps(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-healthy") as lab:
        report = diagnose(target="node:gpu-node-02", settings=lab.settings())
    assert report.verdict.layer is None and report.findings == ()
    status = next(item for item in report.observations if item.kind == "node_status")
    assert status.fields["cordoned"] is False
    ready = next(item for item in status.fields["conditions"] if item["type"] == "Ready")
    assert ready["status"] == "True" and ready["age_seconds"] >= 86400
    assert status.fields["resources"]["nvidia.com/gpu"] == {"capacity": "8", "allocatable": "8"}
    stack = {item.fields["pod"].split("-daemonset")[0] for item in report.observations if item.kind == "gpu_stack_pod"}
    assert {"nvidia-driver", "nvidia-device-plugin"} <= stack


def test_an_xid_node_shows_the_xid_the_withdrawn_gpu_the_workloads_on_it_and_the_commands_to_run(
    tmp_path: Path,
) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as lab:
        report = diagnose(target="node:gpu-node-05", settings=lab.settings())
    rules = {item.rule for item in report.findings}
    assert {"runtime.gpu-lost", "runtime.gpu-withdrawn", "node.next-steps"} <= rules
    radius = next(item for item in report.observations if item.kind == "node_blast_radius")
    assert radius.fields["listed"] == ["jobset/ml/train-llm"] and radius.fields["gpus_requested"] == 8
    steps = next(item for item in report.findings if item.rule == "node.next-steps")
    commands = [item.command for item in steps.evidence]
    assert commands[0] == "kubectl cordon gpu-node-05"
    assert commands[1].startswith("kubectl drain gpu-node-05 --ignore-daemonsets")
    assert "jobset/ml/train-llm" in steps.evidence[1].excerpt
    assert any("reboot" in command for command in commands)  # Xid 79: a reset does not bring the GPU back
    assert any("nvidia-bug-report.sh" in command for command in commands)
    assert commands[-1] == "kubectl uncordon gpu-node-05"
    assert "never run" in steps.summary


def test_a_failing_driver_pod_is_read_with_its_previous_log(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-driver") as lab:
        report = diagnose(target="node:gpu-node-08", settings=lab.settings())
        log_reads = [record for record in lab.server.requests if record.path.endswith("/log")]
    assert log_reads and all("/namespaces/gpu-operator/" in record.path for record in log_reads)
    assert {record.path for record in log_reads if "previous=true" in record.query} == {
        record.path for record in log_reads}  # the crashed instance's log, not only the waiting one
    lost = next(item for item in report.findings if item.rule == "runtime.gpu-lost")
    assert "Failed to initialize NVML" in lost.summary
    steps = next(item for item in report.findings if item.rule == "node.next-steps")
    assert any(command.startswith("kubectl logs -n gpu-operator nvidia-driver-daemonset") for command in
               (item.command for item in steps.evidence))


def test_a_not_ready_node_says_so_with_its_age_and_the_kubelet_to_check(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-not-ready") as lab:
        report = diagnose(target="node:gpu-node-07", settings=lab.settings())
    assert report.findings[0].rule == "runtime.node-not-ready"
    status = next(item for item in report.observations if item.kind == "node_status")
    ready = next(item for item in status.fields["conditions"] if item["type"] == "Ready")
    assert ready["status"] == "Unknown" and 500 <= ready["age_seconds"] < 3600
    assert "node.kubernetes.io/unreachable=:NoExecute" in status.fields["taints"]
    steps = next(item for item in report.findings if item.rule == "node.next-steps")
    assert "journalctl -u kubelet" in steps.next_step


def test_a_node_the_cluster_does_not_have_is_not_found(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-healthy") as lab, pytest.raises(TargetNotFound,
                                                                                        match="no node named"):
        diagnose(target=parse_node_target("gpu-node-99"), settings=lab.settings())


def test_a_forbidden_pod_list_is_reported_and_the_node_still_triaged(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as lab:
        lab.server.inject(path_pattern=r"^/api/v1/pods$", status=403)
        report = diagnose(target="node:gpu-node-05", settings=lab.settings())
    assert report.verdict.layer is not None and report.verdict.layer.value == "runtime"
    assert any("node.pods: forbidden" in line for line in report.not_checked)
    assert "snapshot.forbidden" in {item.rule for item in report.findings}


def test_a_slow_api_server_cannot_hold_a_node_snapshot_past_its_deadline(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as lab:
        lab.server.inject(path_pattern=r"^/api/v1/pods$", latency_seconds=5.0)
        report = diagnose(target="node:gpu-node-05",
                          settings=lab.settings(deadline_seconds=1.5, call_timeout_seconds=1.0))
    assert report.elapsed_ms < 2500
    assert any(line.startswith("node.pods: timeout") for line in report.not_checked)
