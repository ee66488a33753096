"""Hostile requests to /slack/events: anything not signed by Slack just now gets 401 and runs nothing."""

from __future__ import annotations

import time

import pytest
import sqlalchemy

from tests.support.slack import SIGNING_SECRET, BotUnderTest, sign, slash_body


def _assert_nothing_ran(bot: BotUnderTest) -> None:
    """No incident, no claimed request, no timeline, no Slack Web API call."""
    assert bot.services.work.wait_idle(timeout=10)
    with bot.services.incidents.engine.connect() as connection:
        for table in ("incident", "processed_request", "timeline_entry", "snapshot"):
            count = connection.execute(sqlalchemy.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
            assert count == 0, f"{table} has {count} row(s)"
    assert bot.slack.calls == []


def test_a_request_signed_with_the_wrong_secret_is_refused(bot: BotUnderTest) -> None:
    body = slash_body(text="job ml/train-7")
    response = bot.post(body, headers=sign(body=body, secret="an-attackers-guess"), signed=False)
    assert response.status_code == 401
    _assert_nothing_ran(bot)


@pytest.mark.parametrize("age_seconds", [5 * 60 + 30, 60 * 60, 24 * 3600])
def test_a_correctly_signed_but_stale_request_is_refused(bot: BotUnderTest, age_seconds: int) -> None:
    body = slash_body(text="job ml/train-7")
    response = bot.post(body, headers=sign(body=body, timestamp=int(time.time()) - age_seconds), signed=False)
    assert response.status_code == 401
    _assert_nothing_ran(bot)


def test_a_timestamp_from_the_future_is_refused(bot: BotUnderTest) -> None:
    body = slash_body(text="job ml/train-7")
    response = bot.post(body, headers=sign(body=body, timestamp=int(time.time()) + 3600), signed=False)
    assert response.status_code == 401
    _assert_nothing_ran(bot)


@pytest.mark.parametrize(
    "drop",
    ["X-Slack-Signature", "X-Slack-Request-Timestamp", "both"],
    ids=["no-signature", "no-timestamp", "none"],
)
def test_a_request_missing_signature_headers_is_refused(bot: BotUnderTest, drop: str) -> None:
    body = slash_body(text="job ml/train-7")
    headers = sign(body=body)
    for name in ("X-Slack-Signature", "X-Slack-Request-Timestamp"):
        if drop in (name, "both"):
            headers.pop(name)
    response = bot.post(body, headers=headers, signed=False)
    assert response.status_code == 401
    _assert_nothing_ran(bot)


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Slack-Signature": "v0=", "X-Slack-Request-Timestamp": "0"},
        {"X-Slack-Signature": "garbage", "X-Slack-Request-Timestamp": "not-a-number"},
        {"X-Slack-Signature": "v1=" + "0" * 64, "X-Slack-Request-Timestamp": str(int(time.time()))},
        {"X-Slack-Signature": "v0=" + "f" * 10_000, "X-Slack-Request-Timestamp": str(int(time.time()))},
        {"X-Slack-Signature": "v0=\u00e9" + "0" * 63, "X-Slack-Request-Timestamp": str(int(time.time()))},
        {"X-Slack-Signature": "v0=" + "0" * 64, "X-Slack-Request-Timestamp": "-1"},
    ],
    ids=["empty", "garbage", "wrong-version", "huge", "non-ascii", "negative-timestamp"],
)
def test_malformed_signature_headers_are_refused(bot: BotUnderTest, headers: dict[str, str]) -> None:
    response = bot.post(slash_body(text="job ml/train-7"), headers=headers, signed=False)
    assert response.status_code == 401
    _assert_nothing_ran(bot)


def test_a_captured_request_replayed_with_a_changed_body_is_refused(bot: BotUnderTest) -> None:
    original = slash_body(text="list", trigger_id="captured.1")
    captured_headers = sign(body=original)
    tampered = original.replace("text=list", "text=job+ml%2Ftrain-7")
    assert tampered != original
    response = bot.post(tampered, headers=captured_headers, signed=False)
    assert response.status_code == 401
    _assert_nothing_ran(bot)


def test_a_captured_body_with_a_recomputed_signature_under_another_secret_is_refused(
    bot: BotUnderTest,
) -> None:
    body = slash_body(text="job ml/train-7", trigger_id="captured.2")
    original = sign(body=body)
    forged = sign(
        body=body, secret=SIGNING_SECRET + "x", timestamp=int(original["X-Slack-Request-Timestamp"])
    )
    assert forged["X-Slack-Signature"] != original["X-Slack-Signature"]
    response = bot.post(body, headers=forged, signed=False)
    assert response.status_code == 401
    _assert_nothing_ran(bot)


def test_a_byte_identical_replay_inside_the_window_runs_only_once(bot: BotUnderTest) -> None:
    body = slash_body(text="job ml/train-7", trigger_id="captured.3")
    headers = sign(body=body)
    assert bot.post(body, headers=headers, signed=False).status_code == 200
    assert bot.post(body, headers=headers, signed=False).status_code == 200
    assert bot.services.work.wait_idle(timeout=30)
    assert len(bot.services.incidents.list_open()) == 1
    roots = [call for call in bot.slack.calls_to("chat.postMessage") if "thread_ts" not in call.params]
    assert len(roots) == 1


def test_the_same_request_properly_signed_is_accepted(bot: BotUnderTest) -> None:
    """The control case: the refusals above are about the signature, not the body."""
    response = bot.command("job ml/train-7")
    assert response.status_code == 200
    assert len(bot.services.incidents.list_open()) == 1
