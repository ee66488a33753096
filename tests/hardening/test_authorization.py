"""Authorization over real HTTP: commander-only actions per incident, and the snapshot allow-list."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest

from bot.config import Settings
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from bot.lab.demo import minimal_diagnoser
from tests.bot.records.conftest import FakeClock
from tests.hardening.conftest import FaultySlackApi, running_bot
from tests.support.slack import BotUnderTest, lab_settings, make_bot, serving, shown


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


# --- every path to a cluster read asks the one rulebook (TRIAGE_SNAPSHOT_ALLOWED_USER_IDS) ---------------


class CountingDiagnoser:
    """The minimal lab cluster, counting every snapshot by target: a cluster read that happens shows up."""

    def __init__(self) -> None:
        self.targets: list[str] = []

    def __call__(self, *, target: Target, settings: Settings) -> SnapshotReport:
        self.targets.append(target.key)
        return minimal_diagnoser(target=target, settings=settings)


@dataclasses.dataclass(kw_only=True)
class AllowListed:
    """A bot whose allow-list names U0ONCALL and U0SRE, its diagnoser and its clock."""

    bot: BotUnderTest
    diagnoser: CountingDiagnoser
    clock: FakeClock

    def thread_texts(self) -> list[str]:
        return [shown(str(call.params.get("text", ""))) for call in self.bot.slack.calls_to("chat.postMessage")]

    def told(self) -> list[str]:
        return self.thread_texts() + [shown(text) for text in _ephemeral_texts(self.bot)]


@pytest.fixture
def guarded(slack_stand_in: FaultySlackApi, tmp_path: Path) -> Iterator[AllowListed]:
    url = f"sqlite:///{tmp_path / 'guarded.db'}"
    diagnoser = CountingDiagnoser()
    clock = FakeClock(start=datetime(2026, 11, 20, 14, 0, tzinfo=UTC))
    settings = lab_settings(
        database_url=url,
        slack=slack_stand_in,
        slack_snapshot_allowed_user_ids="U0ONCALL, U0SRE",
        node_probe_runner="srun",
    )
    built = make_bot(database_url=url, slack=slack_stand_in, diagnoser=diagnoser, settings=settings, clock=clock)
    with serving(built, slack=slack_stand_in) as bot:
        bot.command("job ml/train-7", user_id="U0SRE")  # an allowed responder opens it: one snapshot
        assert diagnoser.targets == ["ml/train-7"]
        slack_stand_in.clear()
        yield AllowListed(bot=bot, diagnoser=diagnoser, clock=clock)


def test_the_rerun_button_takes_no_snapshot_for_someone_off_the_allow_list(guarded: AllowListed) -> None:
    guarded.bot.interact(
        {
            "type": "block_actions",
            "user": {"id": "U0VISITOR"},
            "channel": {"id": "C0INC"},
            "actions": [{"action_id": "rerun_snapshot", "value": "INC-0001", "action_ts": "1.1", "type": "button"}],
        }
    )
    assert guarded.diagnoser.targets == ["ml/train-7"]
    assert len(guarded.bot.services.incidents.snapshots(incident_key="INC-0001")) == 1
    assert any("allow-list" in text for text in _ephemeral_texts(guarded.bot))
    assert guarded.thread_texts() == []  # nothing announced in the thread for a refused click


def test_compare_takes_no_healthy_snapshot_for_someone_off_the_allow_list(guarded: AllowListed) -> None:
    guarded.bot.command("compare INC-0001 ml/train-healthy", user_id="U0VISITOR")
    assert guarded.diagnoser.targets == ["ml/train-7"]
    assert any("No comparison" in text and "allow-list" in text for text in guarded.told())


def test_fabric_probe_starts_no_process_for_someone_off_the_allow_list(guarded: AllowListed) -> None:
    with mock.patch("subprocess.Popen", side_effect=AssertionError("a probe process was started")) as popen:
        guarded.bot.command("fabric INC-0001 probe", user_id="U0VISITOR")
    assert popen.call_count == 0
    assert any("No probe ran" in text and "allow-list" in text for text in guarded.told())


def test_a_change_applied_by_someone_off_the_allow_list_schedules_windows_that_read_nothing(
    guarded: AllowListed,
) -> None:
    bot = guarded.bot
    bot.command("change batch | batch 32 -> 16 | no OOM | restarts | batch back to 32", user_id="U0VISITOR")
    bot.command("change 1 applied", user_id="U0VISITOR")
    core = bot.services.core
    windows = core.tasks.tasks(incident_key="INC-0001", kind="validation_window")
    assert [task.payload["requested_by"] for task in windows] == ["U0VISITOR", "U0VISITOR"]
    guarded.clock.advance(timedelta(minutes=61))
    assert core.runner.run_due().ran >= 2
    assert guarded.diagnoser.targets == ["ml/train-7"]
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 1
    assert any("Validation window +15m" in text and "allow-list" in text for text in guarded.thread_texts())


def test_a_change_applied_by_an_allowed_responder_is_revalidated_in_each_window(guarded: AllowListed) -> None:
    bot = guarded.bot
    bot.command("change batch | batch 32 -> 16 | no OOM | restarts | batch back to 32", user_id="U0VISITOR")
    bot.command("change 1 applied", user_id="U0ONCALL")
    guarded.clock.advance(timedelta(minutes=61))
    assert bot.services.core.runner.run_due().ran >= 2
    assert guarded.diagnoser.targets == ["ml/train-7"] * 3


def test_only_the_commander_or_an_admin_moves_the_status_severity_or_resolution(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    incidents = bot.services.incidents
    before = incidents.get(incident_key="INC-0001")
    for text in ("status mitigated", "severity low", "resolve fixed it"):
        bot.command(text, user_id="U0MALLORY")
    after = incidents.get(incident_key="INC-0001")
    assert (after.status, after.severity) == (before.status, before.severity)
    refusals = _ephemeral_texts(bot)[-3:]
    assert all("Only the commander" in text for text in refusals), refusals
    bot.command("resolve", user_id="U0ALICE")
    bot.command("reopen INC-0001", user_id="U0MALLORY")
    assert incidents.get(incident_key="INC-0001").status == "resolved"
    assert "Only the commander" in _ephemeral_texts(bot)[-1]
