"""A failing snapshot beside a healthy one gives a ranked diff of what could matter."""

from __future__ import annotations

from pathlib import Path

from bot.diagnosis.compare import compare_snapshots
from bot.diagnosis.service import diagnose
from tests.support.kube_lab import running_lab


def test_a_gpu_xid_failure_ranks_node_health_above_placement(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="gpu-xid") as lab:
        failing = diagnose(target="ml/train-llm", settings=lab.settings())
        healthy = diagnose(target="ml/train-llm-ok", settings=lab.settings())
    differences = compare_snapshots(failing=failing, healthy=healthy)
    categories = [item.category for item in differences]
    assert categories == sorted(categories, key=lambda c: next(d.rank for d in differences if d.category == c))
    assert categories[0] == "node_event"
    xid = next(item for item in differences if item.key == "XidError")
    assert "Xid" in xid.failing and xid.healthy == "(absent)"
    assert any(item.category == "gpu_capacity" and "node/gpu-node-05: 7/8" in item.failing for item in differences)
    nodes = next(item for item in differences if item.key == "nodes")
    assert nodes.failing == "gpu-node-05, gpu-node-06" and nodes.healthy == "gpu-node-01, gpu-node-02"


def test_identical_settings_do_not_appear_in_the_diff(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="nccl-ib") as lab:
        failing = diagnose(target="ml/train-llm", settings=lab.settings())
        healthy = diagnose(target="ml/train-llm-ok", settings=lab.settings())
    keys = {(item.category, item.key) for item in compare_snapshots(failing=failing, healthy=healthy)}
    assert ("env", "NCCL_IB_HCA") not in keys and ("image", "trainer") not in keys
    assert ("version", "nccl") in keys and ("container_state", "trainer") in keys


def test_containers_that_ended_differently_are_reported(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="trt-engine") as lab:
        failing = diagnose(target="serving/llm-engine-build", settings=lab.settings())
        healthy = diagnose(target="serving/llm-engine-build-ok", settings=lab.settings())
    differences = {(item.category, item.key): item for item in compare_snapshots(failing=failing, healthy=healthy)}
    assert differences[("container_state", "engine-build")].failing == "terminated Error"
    assert differences[("container_state", "engine-build")].healthy == "terminated Completed"
