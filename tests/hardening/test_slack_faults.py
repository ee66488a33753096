"""Slack misbehaving: retries, replicas, 429, 5xx, ok:false, timeouts. Nothing lost, nothing doubled."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy

from tests.hardening.conftest import FaultySlackApi, root_messages, running_bot
from tests.support.slack import BotUnderTest, sign, slash_body


def _incident_rows(bot: BotUnderTest) -> int:
    with bot.services.incidents.engine.connect() as connection:
        return connection.execute(sqlalchemy.text("SELECT COUNT(*) FROM incident")).scalar_one()


def _ephemeral_texts(slack: FaultySlackApi) -> list[str]:
    return [str(call.params.get("text", "")) for call in slack.calls_to("chat.postEphemeral")]


# --- duplicates: retries, replays, replicas ---------------------------------------------------------


def test_slack_retries_of_one_command_open_one_incident_and_post_one_root(bot: BotUnderTest) -> None:
    body = slash_body(text="job ml/train-7", trigger_id="4242.retry")
    assert bot.post(body).status_code == 200
    for number, reason in ((1, "http_timeout"), (2, "http_timeout"), (3, "http_error")):
        retry = bot.post(body, headers={"X-Slack-Retry-Num": str(number), "X-Slack-Retry-Reason": reason})
        assert retry.status_code == 200
    assert bot.services.work.wait_idle(timeout=30)
    assert _incident_rows(bot) == 1
    assert len(root_messages(bot.slack)) == 1
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 1


def test_a_retried_note_is_recorded_once(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7")
    body = slash_body(text="note drained gpu-07", trigger_id="4243.note")
    bot.post(body)
    bot.post(body, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    assert bot.services.work.wait_idle(timeout=30)
    notes = [item for item in bot.services.incidents.timeline("INC-0001") if item.kind == "note"]
    assert [item.text for item in notes] == ["drained gpu-07"]


def test_two_replicas_receiving_the_same_command_open_one_incident_with_one_root(
    slack_stand_in: FaultySlackApi, database_url: str
) -> None:
    body = slash_body(text="job ml/train-7", trigger_id="4244.replicas")
    headers = sign(body=body)
    with (
        running_bot(database_url=database_url, slack=slack_stand_in) as first,
        running_bot(database_url=database_url, slack=slack_stand_in) as second,
    ):
        slack_stand_in.clear()
        barrier = threading.Barrier(2)
        statuses: list[int] = []

        def deliver(replica: BotUnderTest) -> None:
            barrier.wait(timeout=10)
            statuses.append(replica.post(body, headers=headers, signed=False).status_code)

        threads = [threading.Thread(target=deliver, args=(replica,)) for replica in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert first.services.work.wait_idle(timeout=30) and second.services.work.wait_idle(timeout=30)
        assert statuses == [200, 200]
        assert _incident_rows(first) == 1
        assert len(root_messages(slack_stand_in)) == 1
        assert len(first.services.incidents.snapshots(incident_key="INC-0001")) == 1


def test_two_people_triaging_the_same_workload_at_once_get_one_incident_and_one_root(
    slack_stand_in: FaultySlackApi, database_url: str
) -> None:
    """Different requests (two trigger ids) on two replicas, while Slack is slow to post the root."""
    with (
        running_bot(database_url=database_url, slack=slack_stand_in) as first,
        running_bot(database_url=database_url, slack=slack_stand_in) as second,
    ):
        slack_stand_in.clear()
        slack_stand_in.inject("chat.postMessage", on_call=1, times=1, delay=1.0)
        first.post(slash_body(text="job ml/train-7", user_id="U0ALICE", trigger_id="a.1"))
        second.post(slash_body(text="job ml/train-7", user_id="U0BOB", trigger_id="b.1"))
        assert first.services.work.wait_idle(timeout=30) and second.services.work.wait_idle(timeout=30)
        assert _incident_rows(first) == 1
        assert len(root_messages(slack_stand_in)) == 1
        told = _ephemeral_texts(slack_stand_in)
        assert len(told) == 1 and "INC-0001" in told[0]


# --- Web API errors ---------------------------------------------------------------------------------


def test_a_429_is_retried_only_after_its_retry_after(bot: BotUnderTest) -> None:
    bot.slack.rate_limit_next("chat.postMessage", retry_after=1)
    bot.command("job ml/train-7")
    refused, retried = root_messages(bot.slack)[:2]
    assert retried.params == refused.params
    assert retried.at - refused.at >= 1.0
    assert len(root_messages(bot.slack)) == 2
    assert bot.services.incidents.get(incident_key="INC-0001").thread_ts is not None


@pytest.mark.parametrize("status", [500, 503])
def test_a_transient_5xx_is_retried_and_the_incident_posts_normally(bot: BotUnderTest, status: int) -> None:
    bot.slack.inject("chat.postMessage", on_call=1, times=1, status=status)
    bot.command("job ml/train-7")
    attempts = root_messages(bot.slack)
    assert len(attempts) == 2 and attempts[0].params == attempts[1].params
    assert bot.services.incidents.get(incident_key="INC-0001").thread_ts is not None
    assert _ephemeral_texts(bot.slack) == []


def test_slack_down_for_good_keeps_the_incident_and_tells_the_user(bot: BotUnderTest) -> None:
    bot.slack.inject("chat.postMessage", on_call=1, times=50, status=503)
    bot.command("job ml/train-7")
    incident = bot.services.incidents.get(incident_key="INC-0001")
    assert incident.thread_ts is None and incident.is_open
    (told,) = _ephemeral_texts(bot.slack)
    assert "INC-0001" in told and "again" in told and "Traceback" not in told
    bot.slack.heal()
    bot.slack.clear()
    bot.command("job ml/train-7")  # Slack is back: the same incident gets its root message
    assert len(root_messages(bot.slack)) == 1
    assert bot.services.incidents.get(incident_key="INC-0001").thread_ts is not None
    assert _incident_rows(bot) == 1


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found"])
def test_a_channel_the_bot_cannot_post_in_tells_the_user_to_invite_it(bot: BotUnderTest, error: str) -> None:
    bot.slack.fail_next("chat.postMessage", error=error)
    bot.command("job ml/train-7")
    (told,) = _ephemeral_texts(bot.slack)
    assert "/invite" in told and error in told and "INC-0001" in told
    assert bot.services.incidents.get(incident_key="INC-0001").is_open


def test_a_failed_findings_post_is_reported_and_the_snapshot_is_kept(bot: BotUnderTest) -> None:
    # Root (1) and "opened by" (2) go through; the findings reply (3) fails even after retries.
    bot.slack.inject("chat.postMessage", on_call=3, times=10, status=503)
    bot.command("job ml/train-7")
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 1
    assert "snapshot" in [item.kind for item in bot.services.incidents.timeline("INC-0001")]
    (told,) = _ephemeral_texts(bot.slack)
    assert "INC-0001" in told and "Traceback" not in told


def test_a_slack_timeout_keeps_the_incident_and_tells_the_user(
    slack_stand_in: FaultySlackApi, tmp_path: Path
) -> None:
    with running_bot(
        database_url=f"sqlite:///{tmp_path / 'timeout.db'}", slack=slack_stand_in, client_timeout=1
    ) as bot:
        slack_stand_in.clear()
        slack_stand_in.inject("chat.postMessage", on_call=1, times=1, delay=3.0)
        bot.command("job ml/train-7")
        incident = bot.services.incidents.get(incident_key="INC-0001")
        assert incident.is_open
        told = _ephemeral_texts(slack_stand_in)
        assert len(told) == 1 and "INC-0001" in told[0] and "Traceback" not in told[0]
