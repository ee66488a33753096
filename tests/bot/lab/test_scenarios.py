"""Every scenario is a busy cluster with one failing target, a healthy sibling and an unrelated failure."""

from __future__ import annotations

import pytest

from bot.diagnosis.collectors.kube.kinds import KINDS, LOOKUP_ORDER
from bot.evidence.targets import parse_target
from bot.lab import scenarios


def _served_as(built: scenarios.Scenario, raw: str) -> list[str]:
    """The kinds under which the lab serves the id's object (the kind typed, or every kind for `ns/name`)."""
    target = parse_target(raw)
    if target.resource:
        plural, _, group = target.resource.partition(".")
        places = [(group, plural)]
    else:
        places = [(KINDS[kind].group, KINDS[kind].plural) for kind in ((target.kind,) if target.kind else LOOKUP_ORDER)]
    return [f"{plural}.{group}" for group, plural in places
            if built.state.get(group=group, plural=plural, namespace=target.namespace or "", name=target.name)]


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_each_scenario_has_its_target_its_healthy_sibling_and_the_unrelated_crash_loop(name: str) -> None:
    built = scenarios.build(name)
    for raw in (built.target, built.healthy_target):
        assert _served_as(built, raw), raw
    assert built.state.get(group="", plural="pods", namespace="web", name="cache-warmer-7d9f") is not None
    assert built.state.count(group="", plural="nodes") >= 16
    assert built.state.count(group="", plural="pods") >= 30, "a busy cluster"


def test_an_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(scenarios.UnknownScenario, match="nccl-ib"):
        scenarios.build("nope")
