"""`POST /alerts/alertmanager` through the one app builder and the real waitress server: authentication, bounds,
one incident per target, the root message, the bot's own snapshot, resolution, shedding."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlmodel import Session, select

from bot.config import Settings
from bot.diagnosis.service import diagnose
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from storage.tables.alerts import ReceivedAlert
from tests.bot.alerts.payloads import RULES, alert, notification, pod_storm, xid
from tests.hardening.conftest import FaultySlackApi
from tests.support.kube_lab import Lab, running_lab
from tests.support.slack import BotUnderTest, lab_settings, make_bot, serving

TOKEN = "alerts-token-0123456789abcdef"
RESOLVED_AT = "2026-03-01T11:00:00Z"
CLOSE = {"Connection": "close"}


def post_alerts(bot: BotUnderTest, payload: dict[str, Any] | bytes, *, token: str | None = TOKEN,
                headers: dict[str, str] | None = None, wait: bool = True) -> requests.Response:
    """POST a webhook body as Alertmanager does (bearer token), then wait for the work it started."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    # Connection: close, so stopping the test server never waits on an idle keep-alive connection.
    sent = {"Content-Type": "application/json", "Connection": "close",
            **({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    response = requests.post(f"{bot.server.url}/alerts/alertmanager", data=body, headers=sent, timeout=30)
    if wait:
        assert bot.services.work.wait_idle(timeout=60), "alert work did not finish"
    return response


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as running:
        yield running


def _bot(*, slack: Any, lab: Lab, tmp_path: Path, **overrides: Any) -> Any:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'alerts.db'}"
    settings = lab_settings(database_url=url, slack=slack).model_copy(update={
        "alerts_token": TOKEN, "alerts_rules_path": rules, "kubeconfig": lab.kubeconfig, **overrides})

    def on_lab(*, target: Target, settings: Settings, **_: Any) -> SnapshotReport:
        return diagnose(target=target, settings=settings)

    return make_bot(database_url=url, slack=slack, diagnoser=on_lab, settings=settings)


@pytest.fixture
def alert_bot(slack_stand_in: Any, lab: Lab, tmp_path: Path) -> Iterator[BotUnderTest]:
    with serving(_bot(slack=slack_stand_in, lab=lab, tmp_path=tmp_path), slack=slack_stand_in) as running:
        yield running


def _rows(bot: BotUnderTest) -> list[ReceivedAlert]:
    with Session(bot.services.core.engine) as session:
        return list(session.exec(select(ReceivedAlert)))


def _posted(bot: BotUnderTest) -> str:
    return json.dumps([call.params for call in bot.slack.calls])


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer wrong-token-0123456789abcdef"},
    {"Authorization": f"Bearer {TOKEN[:-1]}"}, {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": "Bearer"},
])
def test_without_the_exact_token_the_intake_answers_401_and_records_nothing(
    alert_bot: BotUnderTest, headers: dict[str, str]
) -> None:
    response = post_alerts(alert_bot, notification(xid()), token=None, headers=headers)
    assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith("Bearer")
    assert _rows(alert_bot) == [] and alert_bot.services.incidents.list_open() == []
    assert alert_bot.slack.calls == []


@pytest.mark.parametrize(("body", "status"), [
    (b"{not json", 400),
    (json.dumps({**notification(xid()), "version": "3"}).encode(), 400),
    (json.dumps(notification(dict(xid(), labels={"bad-name": "1"}))).encode(), 400),
    (b"x" * (5 * 1024 * 1024), 413),
])
def test_a_malformed_or_oversized_body_is_refused_and_nothing_changes(
    alert_bot: BotUnderTest, body: bytes, status: int
) -> None:
    response = post_alerts(alert_bot, body)
    assert response.status_code == status and "error" in response.json()
    assert _rows(alert_bot) == [] and alert_bot.slack.calls == []


def test_only_post_is_served_and_an_intake_without_a_token_is_off(
    alert_bot: BotUnderTest, slack_stand_in: Any, lab: Lab, tmp_path: Path
) -> None:
    assert requests.get(f"{alert_bot.server.url}/alerts/alertmanager", timeout=10, headers=CLOSE).status_code == 405
    off = make_bot(database_url=f"sqlite:///{tmp_path / 'off.db'}", slack=slack_stand_in, diagnoser=None)
    with serving(off, slack=slack_stand_in) as running:
        response = post_alerts(running, notification(xid()))
    assert response.status_code == 404 and "TRIAGE_ALERTS_TOKEN" in response.json()["error"]


def test_a_gpu_alert_opens_one_node_incident_named_in_the_root_and_the_bot_snapshots_it(
    alert_bot: BotUnderTest,
) -> None:
    response = post_alerts(alert_bot, notification(xid(gpu="3"), xid(gpu="5")))
    assert response.status_code == 200 and response.json() == {"status": "accepted", "alerts": 2}
    (incident,) = alert_bot.services.incidents.list_open()
    assert (incident.target, incident.channel_id, incident.opened_by) == ("node:gpu-node-05", "C0ALERTS", "triage-bot")
    root, opened, findings, *_ = alert_bot.slack.calls_to("chat.postMessage")
    root_text = json.dumps(root.params)
    assert "thread_ts" not in root.params and "DCGMXidErrors" in root_text and "[critical]" in root_text
    assert "GPU 3 on gpu-node-05 reported Xid 79" in root_text
    assert "http://alertmanager:9093/#/alerts?filter=" in root_text and "<@triage-bot>" not in root_text
    details = json.dumps(opened.params)
    assert "fallen off the bus" in details and "source graph" in details and "UUID" in details
    assert "runtime.gpu-lost" in json.dumps(findings.params) and "kubectl cordon gpu-node-05" in json.dumps(findings.params)
    started = next(item for item in alert_bot.services.incidents.timeline(incident.key) if item.kind == "snapshot_started")
    assert started.actor == "triage-bot"


def test_a_storm_of_300_pod_alerts_and_its_repeats_open_one_incident_with_one_root(
    alert_bot: BotUnderTest,
) -> None:
    storm = notification(*pod_storm(count=300))
    for _ in range(3):
        assert post_alerts(alert_bot, storm).status_code == 200
    (incident,) = alert_bot.services.incidents.list_open()
    assert incident.target == "job/ml/train-llm" and incident.channel_id == "C0MLOPS"
    roots = [call for call in alert_bot.slack.calls_to("chat.postMessage") if "thread_ts" not in call.params]
    assert len(roots) == 1 and len(_rows(alert_bot)) == 300
    metrics = requests.get(f"{alert_bot.server.url}/metrics", timeout=10, headers=CLOSE).text
    assert 'triage_alert_incidents_total{result="opened"} 1.0' in metrics
    assert 'triage_alerts_total{action="repeated"} 600.0' in metrics


def test_resolved_alerts_go_on_the_timeline_and_the_bot_suggests_resolving_once(alert_bot: BotUnderTest) -> None:
    first, second = xid(gpu="3"), xid(gpu="5")
    post_alerts(alert_bot, notification(first, second))
    alert_bot.slack.clear()
    post_alerts(alert_bot, notification(dict(first, status="resolved", endsAt=RESOLVED_AT)))
    assert "Every alert" not in _posted(alert_bot) and "Resolved" in _posted(alert_bot)
    post_alerts(alert_bot, notification(dict(second, status="resolved", endsAt=RESOLVED_AT)))
    suggestion = [call for call in alert_bot.slack.calls_to("chat.postMessage") if "Every alert" in call.params["text"]]
    assert len(suggestion) == 1 and "/triage resolve INC-0001" in json.dumps(suggestion[0].params)
    kinds = [item.kind for item in alert_bot.services.incidents.timeline("INC-0001")]
    assert kinds.count("alert_resolved") == 2 and kinds[-1] == "alerts_all_resolved"
    assert alert_bot.services.incidents.get(incident_key="INC-0001").status == "investigating"


def test_a_pod_only_alert_is_traced_to_its_workload_by_reading_the_pod(alert_bot: BotUnderTest) -> None:
    pod = alert(labels={"alertname": "KubePodCrashLooping", "namespace": "ml",
                        "pod": "train-llm-trainer-0-0-x0k2p", "container": "trainer"})
    post_alerts(alert_bot, notification(pod))
    (incident,) = alert_bot.services.incidents.list_open()
    assert incident.target == "jobset/ml/train-llm"


def test_alert_text_cannot_ping_the_channel_or_forge_a_link(alert_bot: BotUnderTest) -> None:
    hostile = xid()
    hostile["annotations"] = {"summary": "<!channel> GPU down <http://evil.example|click here>",
                              "runbook_url": "http://runbooks.example/x|fake>"}
    post_alerts(alert_bot, notification(hostile))
    posted = _posted(alert_bot)
    assert "<!channel>" not in posted and "<http://evil.example|click here>" not in posted
    # Links are shown as the URL itself (Slack links it as typed): no label can disguise where it goes.
    assert "runbook_url:* http://runbooks.example/x|fake&gt;" in posted and "|runbook_url>" not in posted


def test_the_bot_snapshots_even_when_only_listed_people_may(
    slack_stand_in: Any, lab: Lab, tmp_path: Path
) -> None:
    bot = _bot(slack=slack_stand_in, lab=lab, tmp_path=tmp_path, slack_snapshot_allowed_user_ids="U0ALICE")
    with serving(bot, slack=slack_stand_in) as running:
        post_alerts(running, notification(xid()))
        (stored,) = running.services.incidents.snapshots(incident_key="INC-0001")
    assert stored["target"] == "node:gpu-node-05"


@pytest.fixture
def slow_slack() -> Iterator[FaultySlackApi]:
    with FaultySlackApi() as stand_in:
        yield stand_in


def test_a_full_queue_sheds_with_503_and_retry_after_counted_and_shown_on_readyz(
    slow_slack: FaultySlackApi, lab: Lab, tmp_path: Path
) -> None:
    bot = _bot(slack=slow_slack, lab=lab, tmp_path=tmp_path, alerts_queue_size=1)
    with serving(bot, slack=slow_slack) as running:
        slow_slack.inject("chat.postMessage", on_call=1, times=1, delay=3.0)  # the worker is busy posting a root
        assert post_alerts(running, notification(xid(node="gpu-node-05")), wait=False).status_code == 200
        assert slow_slack.wait_for(lambda calls: False, timeout=0.5) is False  # let the worker take it
        assert post_alerts(running, notification(xid(node="gpu-node-06")), wait=False).status_code == 200
        shed = post_alerts(running, notification(xid(node="gpu-node-07")), wait=False)
        assert shed.status_code == 503 and shed.headers["Retry-After"] == "30"
        ready = requests.get(f"{running.server.url}/readyz", timeout=10, headers=CLOSE).json()
        assert ready["alerts"]["shed_total"] == 1 and ready["alerts"]["capacity"] == 1
        metrics = requests.get(f"{running.server.url}/metrics", timeout=10, headers=CLOSE).text
        assert 'triage_alert_notifications_total{outcome="shed"} 1.0' in metrics
        assert running.services.work.wait_idle(timeout=60)
        assert {item.target for item in running.services.incidents.list_open()} == {
            "node:gpu-node-05", "node:gpu-node-06"}
