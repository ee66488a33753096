"""The real kubernetes client against every lab scenario: the collectors see the failure, and only the target."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.diagnosis.service import diagnose
from bot.evidence.findings import CollectorOutcome, Observation
from bot.lab import scenarios
from tests.support.kube_lab import running_lab

Check = Callable[[Observation], bool]


def _kind(kind: str, /, *, is_current: bool | None = None, **expected: Any) -> Check:
    """An observation of that kind (current or history when said) whose fields hold the expected values."""
    def check(item: Observation) -> bool:
        return item.kind == kind and (is_current is None or item.current is is_current) and all(
            (value(item.fields.get(key)) if callable(value) else item.fields.get(key) == value)
            for key, value in expected.items())
    return check


def _contains(text: str) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and text in value


EXPECTED: dict[str, list[Check]] = {
    "pending-gpu-capacity": [
        _kind("pod_condition", type="PodScheduled", reason="Unschedulable",
              message=_contains("Insufficient nvidia.com/gpu")),
        _kind("event", reason="FailedScheduling", count=37, type="Warning")],
    "pending-gpu-taint": [_kind("pod_condition", type="PodScheduled", message=_contains("untolerated taint"))],
    "crashloop": [
        _kind("container_state", reason="CrashLoopBackOff", restart_count=7),
        _kind("container_termination", reason="Error", exit_code=1),
        _kind("log_line", previous=True, line=_contains("ModuleNotFoundError"))],
    "oom": [_kind("container_termination", reason="OOMKilled", exit_code=137)],
    "trt-engine": [_kind("log_line", pattern="trt_error"), _kind("container_state", reason="Error", exit_code=1)],
    "nccl-ib": [
        _kind("log_line", pattern="nccl_warn", host="gpu-node-03", peer="gpu-node-07", hca="mlx5_2"),
        _kind("log_line", pattern="nccl_warn", host="gpu-node-07", peer="gpu-node-03", hca="mlx5_2")],
    "gpu-xid": [
        _kind("event", reason="XidError", message=_contains("Xid (PCI:0000:9b:00): 79")),
        _kind("node_capacity", gpu_capacity=8, gpu_allocatable=7),
        _kind("log_line", pattern="cuda_error")],
    "kueue-quota": [_kind("kueue_workload", admitted=False, quota_reserved=False,
                          message=_contains("insufficient unused quota for nvidia.com/gpu"))],
    "kueue-not-installed": [_kind("api_group_missing", group="kueue.x-k8s.io", status=404),
                            _kind("kueue_workload_missing", queue_name="team-ml")],
    "aiperf-endpoint": [_kind("aiperf_status", phase="Failed", error=_contains("endpoint health check")),
                        _kind("log_line", pattern="connection_refused")],
    "aiperf-error-rate": [_kind("aiperf_status", phase="Running", request_error_rate=12.5)],
    "aiperf-pending": [_kind("aiperf_status", phase="Pending"),
                       _kind("pod_condition", reason="Unschedulable", message=_contains("untolerated taint"))],
    "aiperf-queued": [_kind("aiperf_status", phase="Queued"),
                      _kind("kueue_workload", admitted=False, message=_contains("insufficient unused quota"))],
    "aiperf-crashloop": [_kind("container_state", reason="CrashLoopBackOff", restart_count=9),
                         _kind("log_line", line=_contains("KeyError"))],
    "healthy": [_kind("container_state", state="running", restart_count=0)],
    "vllm-crashloop": [
        _kind("workload_status", kind="deployment", replicas=3, ready_replicas=1, unavailable_replicas=2),
        _kind("workload_condition", type="Progressing", reason="ProgressDeadlineExceeded"),
        _kind("rollout_replicaset", current=True, failing=True, revision="2"),
        _kind("log_line", previous=True, line=_contains("larger than the maximum number of tokens"))],
    "healthy-history": [
        _kind("event", is_current=False, reason="FailedScheduling"),
        _kind("container_termination", is_current=False, reason="OOMKilled"),
        _kind("event", is_current=False, reason="XidError"),
        _kind("target_health", healthy=True, state="healthy")],
    "init-model-download": [
        _kind("container_state", role="init", container="model-download", reason="CrashLoopBackOff"),
        _kind("log_line", container="model-download", previous=True, line=_contains("GatedRepoError")),
        _kind("log_skipped", container="vllm", waiting_reason="PodInitializing")],
    "image-tag-missing": [
        _kind("event", reason="Failed", message=_contains(": not found")),
        _kind("log_skipped", container="trainer", waiting_reason="ErrImagePull")],
    "image-registry-timeout": [
        _kind("event", reason="Failed", message=_contains("i/o timeout")),
        _kind("log_skipped", container="trainer", waiting_reason="ImagePullBackOff")],
    "pending-node-no-driver": [
        _kind("nodeclaim", node="gpu-node-13", ready=False),
        _kind("node_capacity", gpus_missing=True, expected_gpus=8, gpu_allocatable=None),
        _kind("gpu_operator_pod", component="nvidia-driver-daemonset", healthy=False, waiting_reason="CrashLoopBackOff"),
        _kind("pod_phase", nominated_node="gpu-node-13")],
    "nccl-path-hostnames": [
        _kind("log_line", host="train-llm-master-0", host_node="gpu-node-03", peer_node="gpu-node-07"),
        _kind("log_line", host="train-llm-worker-0", host_node="gpu-node-07", peer_node="gpu-node-03")],
    "statefulset-nfs": [
        _kind("workload_status", kind="statefulset", unavailable_replicas=1),
        _kind("event", reason="FailedMount", message=_contains("mount.nfs"))],
    "cronjob-latest": [
        _kind("workload_status", kind="cronjob", name="nightly-eval"),
        _kind("workload_status", kind="job", latest=True, failed=1, owner="cronjob/nightly-eval"),
        _kind("log_line", line=_contains("FileNotFoundError"))],
    "rayjob-pending": [
        _kind("workload_status", kind="rayjob", phase="Initializing (job PENDING)"),
        _kind("pod_condition", reason="Unschedulable", message=_contains("untolerated taint"))],
    "inferenceservice-oom": [
        _kind("workload_status", kind="inferenceservice", phase="NotReady"),
        _kind("container_state", role="init", container="storage-initializer", state="terminated"),
        _kind("log_line", container="kserve-container", line=_contains("CUDA out of memory"))],
    "bare-pod": [
        _kind("workload_status", kind="pod", phase="Failed"),
        _kind("log_line", line=_contains("Driver/library version mismatch"))],
    "unknown-crd": [
        _kind("workload_status", kind="modelservers.serving.example.com", name="llama-srv"),
        _kind("log_line", line=_contains("exec format error"))],
    "healthy-serving": [
        _kind("target_health", healthy=True),
        _kind("container_termination", is_current=False, exit_code=1)],
}


def test_every_scenario_has_expectations() -> None:
    assert set(EXPECTED) == set(scenarios.SCENARIOS)


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_the_collectors_see_the_scenarios_failure_and_nothing_unrelated(name: str, tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario=name) as lab:
        assert lab.scenario is not None
        report = diagnose(target=lab.scenario.target, settings=lab.settings())
        requests = [(record.path, record.query) for record in lab.server.requests]
    for check in EXPECTED[name]:
        assert any(check(item) for item in report.observations), (name, check)
    assert not [item for item in report.observations if "cache-warmer" in item.subject + item.text]
    assert not [item for item in report.observations if "gpu-node-12" in item.subject]
    assert {r.outcome for r in report.collectors} <= {CollectorOutcome.OK, CollectorOutcome.SKIPPED}
    assert not [path for path, _ in requests if path in ("/api/v1/pods", "/api/v1/nodes")], "never sweep"
    assert all("involvedObject.name" in query for path, query in requests if path.endswith("/events"))
    listed = [query for path, query in requests if path.endswith(("/pods", "/replicasets", "/jobs"))]
    assert all("labelSelector=" in query or "fieldSelector=" in query for query in listed), "lists are selected"
    assert not [item for item in report.observations if item.subject.endswith("-canary")], "only pods it owns"
    assert all(item.command for item in report.observations if item.source != "snapshot")


def test_the_target_kind_is_resolved_in_order_and_named(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="aiperf-endpoint") as lab:
        report = diagnose(target="perf/bench-llm", settings=lab.settings())
    assert report.target_kind == "aiperfjob"


def test_placement_carries_images_with_digests_nodes_and_versions(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="nccl-ib") as lab:
        report = diagnose(target="ml/train-llm", settings=lab.settings())
    assert report.placement["nodes"] == "gpu-node-03, gpu-node-07"
    assert report.placement["image:trainer"].startswith("nvcr.io/nvidia/pytorch:24.05-py3@sha256:")
    assert report.placement["driver:gpu-node-03"] == "550.90.07"
    assert report.placement["nccl_version"] == "2.21.5"
    assert report.placement["env:NCCL_IB_HCA"] == "mlx5_0,mlx5_1,mlx5_2,mlx5_3"


def test_events_are_read_newest_first_with_server_side_field_selectors(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="gpu-xid") as lab:
        diagnose(target="ml/train-llm", settings=lab.settings())
        event_queries = [record.query for record in lab.server.requests if record.path.endswith("/events")]
    assert event_queries and all("fieldSelector=involvedObject" in query for query in event_queries)
    assert all("limit=" in query for query in event_queries)


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_with_the_classifier_each_scenario_lands_on_its_layer(name: str, tmp_path: Path) -> None:
    pytest.importorskip("bot.diagnosis.classify", reason="the classifier package is merged from its own branch")
    with running_lab(tmp_path=tmp_path, scenario=name) as lab:
        assert lab.scenario is not None
        report = diagnose(target=lab.scenario.target, settings=lab.settings())
    layer = report.verdict.layer.value if report.verdict.layer else None
    assert layer == lab.scenario.expected_layer, report.verdict.summary


@pytest.mark.parametrize(("scenario", "kind", "pods"), [
    ("nccl-ib", "pytorchjob", {"train-llm-master-0", "train-llm-worker-0"}),
    ("gpu-xid", "jobset", {"train-llm-trainer-0-0-x0k2p", "train-llm-trainer-1-0-x1k2p"}),
])
def test_pytorchjob_and_jobset_members_are_found_by_their_controllers_labels(
        scenario: str, kind: str, pods: set[str], tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario=scenario) as lab:
        report = diagnose(target="ml/train-llm", settings=lab.settings())
        tried = [r.path.rsplit("/", 2)[-2] for r in lab.server.requests if r.path.endswith("/train-llm")]
    assert report.target_kind == kind
    assert tried[: tried.index(kind + "s") + 1] == ["jobs", "jobsets", "pytorchjobs"][: tried.index(kind + "s") + 1]
    assert {item.subject.rsplit("/", 1)[-1] for item in report.observations if item.kind == "pod_phase"} == pods
