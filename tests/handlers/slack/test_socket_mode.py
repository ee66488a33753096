"""Socket Mode for real: the app from the one builder, connected by `serve`'s own `connect_socket_mode` (Bolt's
SocketModeHandler on slack_sdk's built-in client) to a local WebSocket stand-in of Slack's Socket Mode, whose
URL comes from `apps.connections.open` on the Web API stand-in."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bot.config import Settings
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import APP_TOKEN, SlackApiStandIn
from handlers.slack.blocks import findings as findings_blocks
from tests.support.kube_lab import running_lab
from tests.support.serve_process import start_serve
from tests.support.slack import make_bot, slash_fields
from tests.support.socket_mode import Envelope, SocketBotUnderTest, SocketModeStandIn, socket_serving


@pytest.fixture
def socket_bot(slack_stand_in: SlackApiStandIn, bot_database_url: str) -> Iterator[SocketBotUnderTest]:
    """The production bot connected over Socket Mode to the stand-ins."""
    built = make_bot(database_url=bot_database_url, slack=slack_stand_in, diagnoser=minimal_diagnoser)
    with socket_serving(built, slack=slack_stand_in) as running:
        yield running


def _roots(slack: SlackApiStandIn) -> list[dict[str, Any]]:
    return [call.params for call in slack.calls_to("chat.postMessage") if not call.params.get("thread_ts")]


def _click(action_id: str, value: str, *, action_ts: str, user: str = "U0ALICE") -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": "T0LAB"},
        "api_app_id": "A0TRIAGE",
        "trigger_id": f"{time.time_ns()}.lab",
        "user": {"id": user},
        "channel": {"id": "C0INC"},
        "container": {"type": "message", "channel_id": "C0INC"},
        "actions": [{"type": "button", "action_id": action_id, "value": value, "block_id": "b", "action_ts": action_ts}],
    }


def test_a_slash_command_over_the_socket_is_acked_with_its_envelope_id_and_opens_one_incident(
    socket_bot: SocketBotUnderTest,
) -> None:
    assert socket_bot.socket.tickets_issued == 1 and len(socket_bot.socket.connections) == 1
    envelope = socket_bot.socket.slash_command(
        slash_fields(text="job ml/train-llama", response_url=socket_bot.slack.response_url())
    )
    ack = socket_bot.socket.wait_for_ack(envelope)
    assert socket_bot.services.work.wait_idle(timeout=30)
    assert ack.envelope_id == envelope.envelope_id and ack.in_time
    assert ack.payload == {"text": ":hourglass_flowing_sand: Opening an incident and taking a bounded snapshot…"}
    (root,) = _roots(socket_bot.slack)
    assert root["text"].startswith("INC-0001")
    findings = [
        call.params
        for call in socket_bot.slack.calls_to("chat.postMessage")
        if call.params.get("thread_ts") and "runtime.oom_killed" in json.dumps(call.params.get("blocks"))
    ]
    assert len(findings) == 1  # acted on once: one incident, one root, one snapshot
    assert [item.key for item in socket_bot.services.incidents.list_open()] == ["INC-0001"]
    assert len(socket_bot.services.incidents.snapshots(incident_key="INC-0001")) == 1
    assert len(socket_bot.socket.deliveries_of(envelope)) == 1 and socket_bot.socket.protocol_errors == []


def test_the_ack_does_not_wait_for_the_snapshot_and_bad_input_is_answered_in_the_ack(
    slack_stand_in: SlackApiStandIn, bot_database_url: str
) -> None:
    release = threading.Event()
    started: list[str] = []

    def held_diagnoser(*, target: Target, settings: Settings) -> SnapshotReport:
        started.append(target.key)
        release.wait(timeout=30)  # the snapshot is still running while the test waits for the ack
        return minimal_diagnoser(target=target, settings=settings)

    built = make_bot(database_url=bot_database_url, slack=slack_stand_in, diagnoser=held_diagnoser)
    with socket_serving(built, slack=slack_stand_in) as running:
        envelope = running.socket.slash_command(slash_fields(text="job ml/train-llama"))
        ack = running.socket.wait_for_ack(envelope, timeout=10)
        assert ack.in_time and not release.is_set()
        release.set()
        assert running.services.work.wait_idle(timeout=30) and started == ["ml/train-llama"]
        refused = running.command("job ml/../etc")
        assert refused.in_time and "Accepted forms" in str((refused.payload or {}).get("text"))
        assert [item.key for item in running.services.incidents.list_open()] == ["INC-0001"]


def test_a_button_over_the_socket_is_acked_and_a_double_click_acts_once(socket_bot: SocketBotUnderTest) -> None:
    socket_bot.command("job ml/train-llama")
    findings = next(
        call.params
        for call in socket_bot.slack.calls_to("chat.postMessage")
        if findings_blocks.RERUN_ACTION in json.dumps(call.params.get("blocks"))
    )
    assert findings["thread_ts"]
    first = socket_bot.interact(_click(findings_blocks.RERUN_ACTION, "INC-0001", action_ts="1700000100.000001"))
    again = socket_bot.interact(_click(findings_blocks.RERUN_ACTION, "INC-0001", action_ts="1700000100.000001"))
    assert first.in_time and again.in_time and first.payload is None  # block_actions take no response payload
    assert len(socket_bot.services.incidents.snapshots(incident_key="INC-0001")) == 2  # the job's and one re-run
    assert socket_bot.socket.protocol_errors == []


def test_a_refused_modal_submission_is_answered_in_the_acks_payload(socket_bot: SocketBotUnderTest) -> None:
    socket_bot.command("job ml/train-llama")
    socket_bot.command("change")
    (opened,) = socket_bot.slack.calls_to("views.open")
    view = opened.params["view"] if isinstance(opened.params["view"], dict) else json.loads(opened.params["view"])
    submission = {
        "type": "view_submission",
        "team": {"id": "T0LAB"},
        "user": {"id": "U0ALICE"},
        "view": {**view, "id": "V0CHANGE", "state": {"values": {}}},
    }
    ack = socket_bot.interact(submission)
    assert ack.payload is not None and ack.payload["response_action"] == "errors"
    assert "rollback_plan" in ack.payload["errors"]
    assert socket_bot.services.core.changes.for_incident(incident_key="INC-0001") == ()


def _job(socket_bot: SocketBotUnderTest, name: str, *, lose_ack: bool = False) -> Envelope:
    return socket_bot.socket.slash_command(
        slash_fields(text=f"job ml/{name}", response_url=socket_bot.slack.response_url()), lose_ack=lose_ack
    )


def _handled_once_each(socket_bot: SocketBotUnderTest, names: list[str], envelopes: list[Envelope]) -> None:
    """One incident, one root and one snapshot per workload: nothing lost, nothing doubled."""
    assert socket_bot.services.work.wait_idle(timeout=30)
    incidents = {item.target: item.key for item in socket_bot.services.incidents.list_open()}
    assert sorted(incidents) == sorted(f"ml/{name}" for name in names)
    roots = [root["text"].split()[0] for root in _roots(socket_bot.slack)]
    assert sorted(roots) == sorted(incidents.values())
    for key in incidents.values():
        assert len(socket_bot.services.incidents.snapshots(incident_key=key)) == 1
    assert socket_bot.socket.unacked() == [] and socket_bot.socket.protocol_errors == []
    redelivered = sum(len(socket_bot.socket.deliveries_of(envelope)) - 1 for envelope in envelopes)
    duplicates = socket_bot.services.metrics.registry.get_sample_value(
        "triage_commands_total", {"subcommand": "job", "outcome": "duplicate"}
    )
    assert redelivered >= 1 and duplicates == redelivered  # each redelivery recognised by its request fingerprint


def test_a_refresh_requested_reconnect_loses_nothing_and_a_lost_ack_is_redelivered_and_acted_on_once(
    socket_bot: SocketBotUnderTest,
) -> None:
    sock = socket_bot.socket
    first = _job(socket_bot, "before")
    before = sock.wait_for_ack(first)
    lost = _job(socket_bot, "ack-lost", lose_ack=True)  # the app handles it, but its ack never reaches Slack
    assert sock.wait(lambda: lost.envelope_id in sock.lost_acks, timeout=10)
    assert socket_bot.services.work.wait_idle(timeout=30)
    old = sock.refresh(reason="refresh_requested")
    during = _job(socket_bot, "during-refresh")
    assert sock.wait_for_connections(2, timeout=30), "the app did not reconnect"
    after = _job(socket_bot, "after")
    for envelope in (lost, during, after):
        sock.wait_for_ack(envelope, timeout=30)
    assert sock.wait(lambda: old.closed_at is not None, timeout=15)
    assert sock.tickets_issued == 2  # a second apps.connections.open for the new connection
    assert len(socket_bot.slack.calls_to("apps.connections.open")) == 1  # (the first was before the test cleared)
    assert before.connection == 1 and len(sock.deliveries_of(lost)) == 2  # delivered again after the refresh
    _handled_once_each(socket_bot, ["before", "ack-lost", "during-refresh", "after"], [first, lost, during, after])


def test_a_dropped_connection_reconnects_and_what_was_not_acked_is_redelivered_and_acted_on_once(
    socket_bot: SocketBotUnderTest,
) -> None:
    sock = socket_bot.socket
    first = _job(socket_bot, "before")
    sock.wait_for_ack(first)
    lost = _job(socket_bot, "ack-lost", lose_ack=True)
    assert sock.wait(lambda: lost.envelope_id in sock.lost_acks, timeout=10)
    assert socket_bot.services.work.wait_idle(timeout=30)
    sock.drop()  # a close frame (1001 going away), no disconnect message first
    assert sock.wait_for_connections(2, timeout=60), "the app did not reconnect"
    after = _job(socket_bot, "after")
    sock.wait_for_ack(lost, timeout=30)
    sock.wait_for_ack(after, timeout=30)
    assert sock.tickets_issued == 2 and [item.connection for item in sock.deliveries_of(lost)] == [1, 2]
    _handled_once_each(socket_bot, ["before", "ack-lost", "after"], [first, lost, after])


def test_serve_in_socket_mode_connects_out_and_runs_job_with_compare_end_to_end(
    tmp_path: Path, slack_stand_in: SlackApiStandIn
) -> None:
    """`triage-bot serve` as an operator starts it: SLACK_APP_TOKEN, no signing secret, a real cluster."""
    with running_lab(tmp_path=tmp_path, scenario="nccl-ib") as lab, SocketModeStandIn(web_api=slack_stand_in) as sock:
        process, health_url = start_serve(
            slack_base_url=slack_stand_in.base_url,
            database_url=f"sqlite:///{tmp_path / 'socket.db'}",
            cwd=tmp_path,
            extra_env={
                "SLACK_APP_TOKEN": APP_TOKEN,
                "SLACK_SIGNING_SECRET": "",
                "KUBECONFIG": str(lab.kubeconfig),
                "TRIAGE_SCHEDULER_ENABLED": "false",
            },
            stderr=subprocess.DEVNULL,
        )
        try:
            assert sock.wait_for_connections(1, timeout=30), "serve did not connect to Socket Mode"
            opened = slack_stand_in.calls_to("apps.connections.open")
            assert [call.token for call in opened] == [APP_TOKEN]
            envelope = sock.slash_command(
                slash_fields(text="job ml/train-llm compare ml/train-llm-ok", response_url=slack_stand_in.response_url())
            )
            ack = sock.wait_for_ack(envelope, timeout=30)
            assert ack.in_time and "Opening an incident" in str((ack.payload or {}).get("text"))
            assert slack_stand_in.wait_for(
                lambda calls: any("difference(s) between" in str(call.params.get("text")) for call in calls),
                timeout=60,
            ), "no comparison was posted"
            roots = _roots(slack_stand_in)
            assert len(roots) == 1 and roots[0]["text"].startswith("INC-0001")
            assert requests.get(f"{health_url}/readyz", timeout=10).json()["ready"] is True
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
            assert sock.wait(lambda: all(item.closed_at is not None for item in sock.connections), timeout=10)
            assert sock.protocol_errors == []
        finally:
            if process.poll() is None:
                process.kill()

