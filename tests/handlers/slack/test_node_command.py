"""`/triage node <name>` through the one app builder, signed HTTP, a lab cluster with a bad GPU node."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.diagnosis.service import diagnose
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from bot.lab.slack_api import SlackApiStandIn
from tests.support.kube_lab import Lab, running_lab
from tests.support.slack import BotUnderTest, make_bot, serving


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as running:
        yield running


@pytest.fixture
def node_bot(slack_stand_in: SlackApiStandIn, lab: Lab, bot_database_url: str) -> Iterator[BotUnderTest]:
    def on_lab(*, target: Target, settings: Settings, **_: Any) -> SnapshotReport:
        del settings
        return diagnose(target=target, settings=lab.settings())

    with serving(make_bot(database_url=bot_database_url, slack=slack_stand_in, diagnoser=on_lab),
                 slack=slack_stand_in) as running:
        yield running


def _text(call: Any) -> str:
    return json.dumps(call.params)


def test_node_opens_one_incident_for_the_node_and_threads_the_verdict_and_the_commands(
    node_bot: BotUnderTest,
) -> None:
    response = node_bot.command("node gpu-node-05")
    assert response.status_code == 200 and "incident for the node" in response.text
    (incident,) = node_bot.services.incidents.list_open()
    assert (incident.target, incident.workload_key) == ("node:gpu-node-05", "node:gpu-node-05")
    root, _opened, findings, *_ = node_bot.slack.calls_to("chat.postMessage")
    assert "INC-0001: node:gpu-node-05" in _text(root)
    posted = _text(findings)
    assert "runtime.gpu-lost" in posted and "kubectl cordon gpu-node-05" in posted
    assert "never run" in posted
    (stored,) = node_bot.services.incidents.snapshots(incident_key=incident.key)
    assert stored["target_kind"] == "node" and stored["verdict"]["layer"] == "runtime"
    assert node_bot.services.incidents.get(incident_key=incident.key).severity == "critical"


def test_a_second_triage_of_the_same_node_links_the_open_incident(node_bot: BotUnderTest) -> None:
    node_bot.command("node gpu-node-05")
    node_bot.slack.clear()
    node_bot.command("node node:gpu-node-05", user_id="U0BOB")
    assert node_bot.slack.calls_to("chat.postMessage") == []
    (ephemeral,) = node_bot.slack.calls_to("chat.postEphemeral")
    assert "INC-0001 is already open for `node:gpu-node-05`" in ephemeral.params["text"]
    assert len(node_bot.services.incidents.list_open()) == 1


def test_a_bad_node_name_is_refused_in_the_ack_and_nothing_is_opened(node_bot: BotUnderTest) -> None:
    response = node_bot.command("node gpu[1-4];reboot")
    shown = html.unescape(response.text)  # what Slack displays of the escaped ack
    assert "Accepted forms" in shown and "/triage node <name>" in shown
    assert node_bot.services.incidents.list_open() == []
    assert node_bot.slack.calls_to("chat.postMessage") == []


def test_handoff_and_postmortem_work_for_a_node_incident(node_bot: BotUnderTest) -> None:
    node_bot.command("node gpu-node-05")
    node_bot.command("note root cause: GPU 3 fell off the bus (Xid 79); board RMA opened")
    node_bot.command("handoff")
    node_bot.command("status resolved")
    node_bot.command("postmortem INC-0001")
    uploads = [call for call in node_bot.slack.calls if call.method == "files.completeUploadExternal"]
    names = json.dumps([call.params for call in uploads])
    assert "INC-0001 handoff" in names and "INC-0001 postmortem" in names
    handoff = next(call for call in node_bot.slack.calls_to("chat.postMessage") if "Handoff for INC-0001" in
                   call.params.get("text", ""))
    assert "node:gpu-node-05" in handoff.params["text"] and "gpu_product:gpu-node-05" in handoff.params["text"]
