"""Routing rules are data: the first matching rule decides; a file that cannot work is refused at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.alerts.routing import RECORD_ONLY, RulesError, decide, load_rules
from tests.bot.alerts.payloads import RULES


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES, encoding="utf-8")
    return path


@pytest.mark.parametrize(("labels", "rule", "action", "channel", "severity", "target"), [
    ({"alertname": "DCGMXidErrors", "Hostname": "n1"}, "gpu-hardware", "open", "C0ALERTS", "critical", "node"),
    ({"alertname": "KubeJobFailed", "namespace": "ml"}, "workloads", "open", "C0MLOPS", "high", "auto"),
    ({"alertname": "Watchdog", "severity": "info"}, "info-only", "record", "C0ALERTS", None, "auto"),
])
def test_the_first_matching_rule_decides(rules_file: Path, labels: dict[str, str], rule: str, action: str,
                                         channel: str, severity: str | None, target: str) -> None:
    decision = decide(load_rules(rules_file), labels)
    assert (decision.rule, decision.action, decision.channel, decision.severity, decision.target) == (
        rule, action, channel, severity, target)


def test_match_re_must_match_the_whole_value_and_no_rule_means_record_only(rules_file: Path) -> None:
    rules = load_rules(rules_file)
    assert decide(rules, {"alertname": "KubeJobFailedTwice"}) is RECORD_ONLY
    assert decide(load_rules(None), {"alertname": "DCGMXidErrors"}) is RECORD_ONLY


@pytest.mark.parametrize(("text", "message"), [
    ("rules: [{name: a, action: open}]", "name no channel"),
    ("channel: '#gpu-ops'\nrules: []", "Slack channel id"),
    ("rules: [{name: a, match_re: {x: '('}}]", "not a regular expression"),
    ("rules: [{name: a}, {name: a}]", "unique"),
    ("rules: [{name: a, acton: open}]", "acton"),
    ("rules: [{name: 'a b'}]", "name"),
    ("rules: [{name: a, action: page}]", "action"),
    ("storm_guard: {max_new_incidents: 0}", "max_new_incidents"),
    ("rules: [", "not YAML"),
])
def test_a_rules_file_that_cannot_work_is_refused_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RulesError, match=message) as caught:
        load_rules(path)
    assert str(path) in str(caught.value)


def test_a_missing_rules_file_is_refused() -> None:
    with pytest.raises(RulesError, match="cannot read"):
        load_rules(Path("/nonexistent/rules.yaml"))
