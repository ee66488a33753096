"""The chart's alert intake: token from a Secret only, routing rules rendered into a ConfigMap the bot accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.alerts.routing import decide, load_rules
from tests.helm.chart import Helm, env_of, of_kind, only, parse_manifests
from tests.helm.scenarios import SCENARIOS

pytestmark = pytest.mark.helm


def _bot(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return only(docs=docs, kind="Deployment")["spec"]["template"]


def test_the_intake_is_off_by_default_with_no_token_rules_or_config_map(helm: Helm) -> None:
    docs = parse_manifests(text=helm.template())
    assert of_kind(docs=docs, kind="ConfigMap") == []
    env = env_of(container=_bot(docs)["spec"]["containers"][0])
    assert not [name for name in env if name.startswith("TRIAGE_ALERTS_")]


def test_enabled_the_token_comes_from_a_secret_and_the_rules_file_is_what_the_bot_loads(
    helm: Helm, tmp_path: Path
) -> None:
    docs = parse_manifests(text=helm.template(values=SCENARIOS["alert-intake"]))
    pod = _bot(docs)
    container = pod["spec"]["containers"][0]
    env = env_of(container=container)
    assert env["TRIAGE_ALERTS_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "triage-triage-bot",
                                                                       "key": "TRIAGE_ALERTS_TOKEN"}
    assert "value" not in env["TRIAGE_ALERTS_TOKEN"] and env["TRIAGE_ALERTS_QUEUE_SIZE"]["value"] == "64"
    mount = next(item for item in container["volumeMounts"] if item["name"] == "alert-rules")
    assert env["TRIAGE_ALERTS_RULES"]["value"] == f"{mount['mountPath']}/rules.yaml" and mount["readOnly"] is True
    volume = next(item for item in pod["spec"]["volumes"] if item["name"] == "alert-rules")
    config_map = only(docs=docs, kind="ConfigMap")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(config_map["data"]["rules.yaml"], encoding="utf-8")
    rules = load_rules(rules_file)  # the bot's own loader: what the chart renders, the bot runs
    gpu = decide(rules, {"alertname": "DCGMXidErrors"})
    assert (gpu.action, gpu.channel, gpu.severity, gpu.target) == ("open", "C0GPUOPS", "critical", "node")
    assert decide(rules, {"alertname": "KubePodCrashLooping"}).channel == "C0MLOPS"
    assert rules.storm_guard.max_new_incidents == 20


def test_changing_the_rules_rolls_the_pods_and_another_secret_can_hold_the_token(helm: Helm) -> None:
    values = SCENARIOS["alert-intake"]
    changed = yaml.safe_load(yaml.safe_dump(values))
    changed["alerts"]["routing"]["rules"][0]["severity"] = "high"
    changed["alerts"]["existingSecret"] = "alertmanager-webhook"
    first, second = (_bot(parse_manifests(text=helm.template(values=item))) for item in (values, changed))
    assert first["metadata"]["annotations"]["checksum/alert-rules"] != second["metadata"]["annotations"][
        "checksum/alert-rules"]
    env = env_of(container=second["spec"]["containers"][0])
    assert env["TRIAGE_ALERTS_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "alertmanager-webhook"


@pytest.mark.parametrize(("values", "complaint"), [
    ({"alerts": {"routing": {"channel": "#gpu-ops"}}}, "alerts.routing.channel: Does not match pattern"),
    ({"alerts": {"routing": {"rules": [{"name": "x", "action": "page"}]}}}, "alerts.routing.rules.0.action"),
    ({"alerts": {"routing": {"rules": [{"name": "x", "acton": "open"}]}}}, "Additional property acton"),
    ({"alerts": {"token": "abc"}}, "Additional property token is not allowed"),
    ({"extraEnv": [{"name": "TRIAGE_ALERTS_TOKEN", "value": "s3cret-s3cret-s3cret"}]}, "extraEnv.0: Must not validate"),
])
def test_the_schema_refuses_alert_values_that_cannot_work(helm: Helm, values: dict[str, Any], complaint: str) -> None:
    result = helm.template_result(values=values)
    assert result.returncode != 0 and complaint in result.stderr


def test_an_opening_rule_without_a_channel_is_refused_before_install(helm: Helm) -> None:
    result = helm.template_result(values={"alerts": {"enabled": True, "routing": {
        "rules": [{"name": "gpu", "match": {"alertname": "DCGMXidErrors"}, "action": "open"}]}}})
    assert result.returncode != 0 and 'alerts.routing.rules "gpu" opens incidents but names no channel' in result.stderr
