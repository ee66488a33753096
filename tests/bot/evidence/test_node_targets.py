"""Node names are validated before anything reads a cluster, and a node incident's stored key parses back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.evidence.node_targets import NodeTarget, parse_node_target
from bot.evidence.targets import InvalidTarget, Platform, parse_target


@pytest.mark.parametrize(("raw", "platform", "name", "key"), [
    ("gpu-node-05", Platform.KUBERNETES, "gpu-node-05", "node:gpu-node-05"),
    ("node:ip-10-0-1-15.ec2.internal", Platform.KUBERNETES, "ip-10-0-1-15.ec2.internal",
     "node:ip-10-0-1-15.ec2.internal"),
    ("slurm:dgx-017", Platform.SLURM, "dgx-017", "slurm-node:dgx-017"),
    ("slurm-node:DGX_A100_3", Platform.SLURM, "DGX_A100_3", "slurm-node:DGX_A100_3"),
])
def test_each_node_form_names_one_node_on_one_platform(raw: str, platform: Platform, name: str, key: str) -> None:
    target = parse_node_target(raw)
    assert (target.platform, target.name, target.key, target.workload_key) == (platform, name, key, key)


@pytest.mark.parametrize("raw", [
    "", "GPU-Node", "node:", "gpu node", "gpu-node-05/x", "slurm:gpu[1-4]", "slurm:a,b", "slurm:-x",
    "node:$(reboot)", "gpu-node-05;rm", "slurm:" + "a" * 200, "ｇｐｕ", "node:../etc",
])
def test_anything_but_one_strict_node_name_is_refused_with_the_accepted_forms(raw: str) -> None:
    with pytest.raises(InvalidTarget, match="Accepted forms|Missing node name|at most"):
        parse_node_target(raw)


def test_a_node_incident_target_parses_back_to_the_same_node_and_never_as_a_namespace() -> None:
    for raw in ("node:gpu-node-05", "slurm-node:dgx-017"):
        parsed = parse_target(raw)
        assert isinstance(parsed, NodeTarget) and parsed.key == raw
    assert not isinstance(parse_target("node/gpu-node-05"), NodeTarget)  # namespace `node`, workload gpu-node-05


def test_a_kubernetes_node_and_a_slurm_node_of_one_host_are_two_incidents() -> None:
    assert parse_node_target("dgx-1").workload_key != parse_node_target("slurm:dgx-1").workload_key


@given(st.text(max_size=80))
def test_whatever_is_accepted_is_a_plain_host_name_that_round_trips(raw: str) -> None:
    try:
        target = parse_node_target(raw)
    except InvalidTarget:
        return
    assert target.name.isascii() and all(ch.isalnum() or ch in "-._" for ch in target.name)
    assert parse_target(target.key) == target
