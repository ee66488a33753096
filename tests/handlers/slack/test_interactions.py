"""A double-clicked button (two block_actions with one action_ts) or Slack's retry of a click acts once."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

import pytest
import requests

from bot.core import Core
from handlers.slack.once import action_fingerprint
from tests.support.slack import BotUnderTest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def bot_database_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """Each click test runs on SQLite and, when available, on PostgreSQL (the claim is a unique row)."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'clicks.db'}"


def _click(
    bot: BotUnderTest,
    *,
    action_id: str,
    value: str,
    action_ts: str,
    user: str = "U0ALICE",
    headers: dict[str, str] | None = None,
) -> requests.Response:
    payload: dict[str, Any] = {
        "type": "block_actions",
        "team": {"id": "T0LAB"},
        "api_app_id": "A0TRIAGE",
        "token": "deprecated",
        "trigger_id": f"{time.time_ns()}.lab",  # Slack gives every delivery its own trigger
        "user": {"id": user},
        "channel": {"id": "C0INC"},
        "container": {"type": "message", "channel_id": "C0INC"},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "value": value,
                "block_id": "b",
                "action_ts": action_ts,
            }
        ],
    }
    response = bot.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), headers=headers)
    assert bot.services.work.wait_idle(timeout=30), "lazy work did not finish"
    return response


def test_a_double_clicked_rerun_button_takes_one_snapshot(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    first = _click(bot, action_id="rerun_snapshot", value="INC-0001", action_ts="1700000100.000001")
    again = _click(bot, action_id="rerun_snapshot", value="INC-0001", action_ts="1700000100.000001")
    assert first.status_code == again.status_code == 200
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 2  # the job's and one re-run
    _click(bot, action_id="rerun_snapshot", value="INC-0001", action_ts="1700000200.000001")
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 3  # a later click is a new one


def test_slacks_retry_of_a_click_is_acked_and_not_acted_on(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    _click(bot, action_id="rerun_snapshot", value="INC-0001", action_ts="1700000300.000001")
    retried = _click(
        bot,
        action_id="rerun_snapshot",
        value="INC-0001",
        action_ts="1700000300.000001",
        headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    assert retried.status_code == 200
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 2


def test_a_double_clicked_applied_button_changes_state_once(
    bot: BotUnderTest,
) -> None:
    area: Core = bot.services.core
    bot.command("job ml/train-llama")
    change = area.changes.propose(
        incident_key="INC-0001",
        what="Lower replicas from 4 to 2",
        variable="replicas",
        expected_effect="fits in memory",
        metric="steps/s",
        rollback_plan="kubectl scale --replicas=4",
        approved_by="U0ALICE",
        proposed_by="U0ALICE",
    ).change
    bot.slack.clear()
    for _ in range(2):
        _click(bot, action_id="triage_change_applied", value=str(change.id), action_ts="1700000400.000001")
    applied = [item for item in bot.services.incidents.timeline("INC-0001") if "applied" in item.text.lower()]
    assert len(applied) == 1
    assert not bot.slack.calls_to("chat.postEphemeral")  # no "already applied" error for the second click


def test_only_block_actions_with_an_action_ts_are_fingerprinted() -> None:
    click = {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": "U1"},
        "actions": [{"action_id": "rerun_snapshot", "action_ts": "17.1"}],
    }
    assert action_fingerprint(click) == "act:T1:U1:rerun_snapshot:17.1"
    assert action_fingerprint({**click, "type": "view_submission"}) is None
    assert action_fingerprint({**click, "actions": [{"action_id": "rerun_snapshot"}]}) is None
