"""The demo picks the lab cluster when it is installed and labels the minimal one otherwise."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from bot.config import Settings
from bot.evidence.targets import parse_target
from bot.lab import demo


def test_without_the_lab_the_demo_uses_the_labelled_minimal_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bot.diagnosis.service", None)  # import raises ImportError
    choice = demo.pick_diagnoser()
    assert choice.diagnoser is demo.minimal_diagnoser
    assert choice.label == "minimal demo cluster"
    report = choice.diagnoser(target=parse_target(choice.target), settings=Settings())
    assert "minimal demo cluster" in report.verdict.summary
    assert report.findings and report.findings[0].evidence


def _fake_lab(monkeypatch: pytest.MonkeyPatch, lab: Any) -> None:
    module = types.ModuleType("bot.diagnosis.service")
    module.lab_diagnoser = lab  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bot.diagnosis.service", module)


def test_a_lab_diagnoser_factory_is_asked_for_the_oom_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def lab_diagnoser(*, scenario: str = "nccl-ib") -> Any:
        asked.append(scenario)
        return demo.minimal_diagnoser

    _fake_lab(monkeypatch, lab_diagnoser)
    choice = demo.pick_diagnoser()
    assert asked == ["oom"]
    assert choice.diagnoser is demo.minimal_diagnoser
    assert "lab cluster" in choice.label


def test_a_lab_diagnoser_that_is_already_a_diagnoser_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    def lab_diagnoser(*, target: Any, settings: Any) -> Any:
        return demo.minimal_diagnoser(target=target, settings=settings)

    _fake_lab(monkeypatch, lab_diagnoser)
    assert demo.pick_diagnoser().diagnoser is lab_diagnoser


def test_the_demo_story_opens_assigns_and_resolves_one_workload() -> None:
    steps = demo.demo_steps(target="ml/train-llm")
    assert steps[0].text == "job ml/train-llm"
    assert steps[-1].text == "status resolved"
    assert any(step.text.startswith("assign") for step in steps)
