"""Every scenario is a busy cluster with one failing target, a healthy sibling and an unrelated failure."""

from __future__ import annotations

import pytest

from bot.evidence.targets import parse_target
from bot.lab import scenarios


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_each_scenario_has_its_target_its_healthy_sibling_and_the_unrelated_crash_loop(name: str) -> None:
    built = scenarios.build(name)
    for raw in (built.target, built.healthy_target):
        target = parse_target(raw)
        kinds = [("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("kubeflow.org", "pytorchjobs"),
                 ("aiperf.nvidia.com", "aiperfjobs")]
        assert any(built.state.get(group=group, plural=plural, namespace=target.namespace or "", name=target.name)
                   for group, plural in kinds), raw
    assert built.state.get(group="", plural="pods", namespace="web", name="cache-warmer-7d9f") is not None
    assert built.state.count(group="", plural="nodes") == 16


def test_an_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(scenarios.UnknownScenario, match="nccl-ib"):
        scenarios.build("nope")
