"""Smaller holes a review found: control characters in notes and exports, huge numbers, other channels'
incidents, a blank signing secret, signed but malformed payloads, and readiness after the database file went."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from typer.testing import CliRunner

from bot.config import Settings
from handlers.main import typer_app
from tests.hardening.conftest import FaultySlackApi
from tests.support.paths import ROOT
from tests.support.slack import (
    BotUnderTest,
    interaction_body,
    lab_settings,
    make_bot,
    serving,
    shown,
    sign,
    slash_body,
)

HOSTILE_CONTROLS = "\x1b[2J\x1b]0;pwned\x07 \u202egnp.exe\x07"


def _ephemeral(bot: BotUnderTest) -> list[str]:
    return [shown(str(call.params.get("text", ""))) for call in bot.slack.calls_to("chat.postEphemeral")]


# --- control characters --------------------------------------------------------------------------------------


def test_control_and_bidi_characters_are_not_kept_in_notes_nor_exported(bot: BotUnderTest, bot_database_url: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    bot.command(f"note saw {HOSTILE_CONTROLS} on node 3", user_id="U0ALICE")
    (note,) = [item for item in bot.services.incidents.timeline("INC-0001") if item.kind == "note"]
    assert not any(ch in note.text for ch in "\x1b\x07\u202e") and "on node 3" in note.text
    monkeypatch.setenv("DATABASE_URL", bot_database_url)
    bot.services.incidents.add_timeline_entry(  # a workload line with ANSI colour, as a collector might keep it
        incident_key="INC-0001", actor="triage-bot", kind="snapshot", text="log: \x1b[31mERROR\x1b[0m \u202eevil"
    )
    result = CliRunner().invoke(typer_app(), ["export", "INC-0001", "--format", "md"])
    assert result.exit_code == 0, result.stderr
    assert "on node 3" in result.stdout
    assert not any(ch in result.stdout for ch in "\x1b\x07\u202e")


# --- huge numbers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["change 99999999999999999999999 applied", "measure 99999999999999999999999 +15m 3GB/s", "change #0 applied"],
)
def test_a_number_no_change_could_have_gets_a_usage_hint_not_a_failure(bot: BotUnderTest, text: str) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    response = bot.command(text, user_id="U0ALICE")
    told = _ephemeral(bot) + [shown(response.text)]
    assert any("is not a change number" in item for item in told), told
    assert not any("failed" in item and "ref" in item for item in told)


# --- other channels' incidents -------------------------------------------------------------------------------


def test_an_incident_of_another_channel_is_neither_listed_nor_touched_from_here(bot: BotUnderTest) -> None:
    bot.command("job ml/private-7", user_id="U0ALICE", channel_id="C0PRIVATE")
    before = len(bot.services.incidents.timeline("INC-0001"))
    bot.slack.clear()
    bot.command("list", user_id="U0MALLORY", channel_id="C0PUBLIC")
    listed = json.dumps([call.params for call in bot.slack.calls_to("chat.postEphemeral")])
    assert "INC-0001" not in listed and "private-7" not in listed
    for text in ("note INC-0001 hello", "handoff INC-0001", "postmortem INC-0001", "snapshot INC-0001",
                 "assign INC-0001 <@U0MALLORY|m> observer", "fabric INC-0001"):
        bot.command(text, user_id="U0MALLORY", channel_id="C0PUBLIC")
    assert len(bot.services.incidents.timeline("INC-0001")) == before
    assert all(call.params.get("channel") != "C0PRIVATE" for call in bot.slack.calls_to("chat.postMessage"))
    assert bot.slack.calls_to("files.completeUploadExternal") == []
    assert all("worked on in its own channel" in text for text in _ephemeral(bot)[1:])
    bot.command("list", user_id="U0ALICE", channel_id="C0PRIVATE")
    assert "INC-0001" in json.dumps(bot.slack.calls_to("chat.postEphemeral")[-1].params)


# --- a blank signing secret ----------------------------------------------------------------------------------


def test_serve_refuses_to_start_with_a_signing_secret_of_spaces(tmp_path: Path) -> None:
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_SIGNING_SECRET": "   ",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", "SLACK_APP_TOKEN": ""}
    done = subprocess.run([sys.executable, "-c", "from handlers.main import main; main()", "serve", "--port", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "SLACK_SIGNING_SECRET" in done.stderr


def test_without_a_signing_secret_the_request_url_accepts_nothing(
    slack_stand_in: FaultySlackApi, bot_database_url: str
) -> None:
    blank = Settings(SLACK_SIGNING_SECRET="   ").slack_signing_secret  # from the environment: spaces are unset
    assert blank is None
    settings = lab_settings(database_url=bot_database_url, slack=slack_stand_in, slack_signing_secret=blank)
    built = make_bot(database_url=bot_database_url, slack=slack_stand_in, diagnoser=None, settings=settings)
    with serving(built, slack=slack_stand_in) as bot:
        body = slash_body(text="job ml/unsigned")
        for headers in ({}, sign(body=body), sign(body=body, secret="")):
            response = requests.post(f"{bot.server.url}/slack/events", data=body.encode(), timeout=10,
                                     headers={"Content-Type": "application/x-www-form-urlencoded", **headers})
            assert response.status_code in (401, 404)
        assert bot.services.incidents.latest() is None
        assert slack_stand_in.calls_to("chat.postMessage") == []


# --- signed but malformed payloads ---------------------------------------------------------------------------


MALFORMED = [
    "payload=not-json",
    "payload=%5B%5D",
    interaction_body({"type": "view_submission"}),
    interaction_body({"type": "view_submission", "view": {"callback_id": "triage_change_modal"}}),
    interaction_body({"type": "view_submission", "user": {"id": "U0A"}, "view": "x"}),
    interaction_body({"type": "block_actions", "actions": "x"}),
    interaction_body({"type": "block_actions", "user": {"id": "U0A"}, "actions": [{"action_id": "rerun_snapshot"}]}),
    interaction_body({"type": "shortcut"}),
]


@pytest.mark.parametrize("body", MALFORMED)
def test_a_signed_malformed_payload_is_refused_without_a_server_error(bot: BotUnderTest, body: str) -> None:
    response = bot.post(body)
    assert bot.services.work.wait_idle(timeout=30)
    assert response.status_code < 500, (response.status_code, response.text)
    assert "Traceback" not in response.text
    assert bot.slack.calls_to("chat.postMessage") == []


# --- readiness -----------------------------------------------------------------------------------------------


def test_readiness_fails_once_the_sqlite_file_is_gone(bot: BotUnderTest, bot_database_url: str) -> None:
    assert requests.get(f"{bot.server.url}/readyz", timeout=10).json()["checks"]["database"] == "ok"
    Path(bot_database_url.removeprefix("sqlite:///")).unlink()
    ready = requests.get(f"{bot.server.url}/readyz", timeout=10)
    assert ready.status_code == 503 and "gone" in ready.json()["checks"]["database"]

