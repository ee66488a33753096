"""Authorization over real HTTP: commander-only actions per incident, and the snapshot allow-list."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hardening.conftest import FaultySlackApi, running_bot
from tests.support.slack import BotUnderTest


def _ephemeral_texts(bot: BotUnderTest) -> list[str]:
    return [str(call.params.get("text", "")) for call in bot.slack.calls_to("chat.postEphemeral")]


def test_only_the_commander_hands_over_command_of_an_incident(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    bot.slack.clear()
    bot.command("assign <@U0MALLORY|mallory> commander", user_id="U0MALLORY")
    assert bot.services.incidents.get(incident_key="INC-0001").holders("commander") == ("U0ALICE",)
    (refused,) = _ephemeral_texts(bot)
    assert "commander" in refused and "Traceback" not in refused
    bot.command("assign <@U0BOB|bob> commander", user_id="U0ALICE")
    assert bot.services.incidents.get(incident_key="INC-0001").holders("commander") == ("U0BOB",)


def test_commander_rights_on_one_incident_give_none_on_another(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE", channel_id="C0ONE")
    bot.command("job ml/train-8", user_id="U0BOB", channel_id="C0TWO")
    bot.command("assign INC-0002 <@U0ALICE|alice> commander", user_id="U0ALICE", channel_id="C0ONE")
    assert bot.services.incidents.get(incident_key="INC-0002").holders("commander") == ("U0BOB",)


@pytest.fixture
def allow_listed_bot(slack_stand_in: FaultySlackApi, tmp_path: Path) -> Iterator[BotUnderTest]:
    with running_bot(
        database_url=f"sqlite:///{tmp_path / 'allow.db'}",
        slack=slack_stand_in,
        slack_snapshot_allowed_user_ids="U0ONCALL, U0SRE",
    ) as bot:
        slack_stand_in.clear()
        yield bot


def test_someone_off_the_snapshot_allow_list_opens_the_incident_but_takes_no_snapshot(
    allow_listed_bot: BotUnderTest,
) -> None:
    allow_listed_bot.command("job ml/train-7", user_id="U0VISITOR")
    incident = allow_listed_bot.services.incidents.get(incident_key="INC-0001")
    assert incident.is_open and incident.thread_ts is not None
    assert allow_listed_bot.services.incidents.snapshots(incident_key="INC-0001") == []
    texts = [str(call.params.get("text", "")) for call in allow_listed_bot.slack.calls_to("chat.postMessage")]
    assert any("No snapshot was taken" in text and "allow-list" in text for text in texts)


def test_someone_on_the_snapshot_allow_list_gets_the_snapshot(allow_listed_bot: BotUnderTest) -> None:
    allow_listed_bot.command("job ml/train-7", user_id="U0SRE")
    assert len(allow_listed_bot.services.incidents.snapshots(incident_key="INC-0001")) == 1
