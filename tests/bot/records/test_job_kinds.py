"""Scheduled work: reminders by severity with snooze, validation windows, prevention follow-ups, digests."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from bot.changes.prevention import PreventionService
from bot.changes.service import ChangeService
from bot.schedule.store import TaskRunner, TaskStore
from bot.schedule.tasks import (
    SNOOZE_ACTION_ID,
    IncidentThread,
    TaskKind,
    build_handlers,
    ensure_weekly_digest,
    schedule_prevention_followup,
    schedule_update_reminder,
    schedule_validation_windows,
    update_interval,
)
from tests.bot.records.recording import DictDirectory, RecordingNotifier, ScriptedRevalidator

THREAD = IncidentThread(
    key="INC-0001",
    channel="C1",
    thread_ts="111.222",
    severity="critical",
    status="investigating",
    owner="U0BOB",
)


@pytest.fixture
def world(sqlite_engine, clock):
    notifier = RecordingNotifier()
    directory = DictDirectory(THREAD)
    revalidator = ScriptedRevalidator(original={"k8s.pending.insufficient_gpu"}, clock=clock)
    store = TaskStore(engine=sqlite_engine, clock=clock)
    changes = ChangeService(engine=sqlite_engine, clock=clock)
    prevention = PreventionService(engine=sqlite_engine, clock=clock)
    handlers = build_handlers(
        notifier=notifier,
        directory=directory,
        revalidator=revalidator,
        prevention=prevention,
        change_lookup=lambda change_id: changes.get(change_id=change_id),
    )
    runner = TaskRunner(store=store, handlers=handlers, instance_id="test")
    return type(
        "World",
        (),
        {
            "notifier": notifier,
            "directory": directory,
            "revalidator": revalidator,
            "store": store,
            "changes": changes,
            "prevention": prevention,
            "runner": runner,
            "clock": clock,
        },
    )


def test_severity_sets_the_reminder_interval() -> None:
    assert update_interval(severity="critical") == timedelta(minutes=15)
    assert update_interval(severity="SEV3") == timedelta(hours=1)
    assert update_interval(severity="unheard-of") == timedelta(hours=1)


def test_a_reminder_fires_at_the_interval_offers_snooze_and_queues_the_next(world) -> None:
    schedule_update_reminder(store=world.store, thread=THREAD, now=world.clock.now)
    world.clock.advance(timedelta(minutes=14))
    assert world.runner.run_due().ran == 0
    world.clock.advance(timedelta(minutes=1))
    assert world.runner.run_due().ran == 1
    post = world.notifier.posts[-1]
    assert post.where == "C1/111.222" and "<@U0BOB>" in post.text and "due an update" in post.text
    assert post.buttons[0].action_id == SNOOZE_ACTION_ID and post.buttons[0].value == "INC-0001"
    pending = [job for job in world.store.tasks(kind=TaskKind.UPDATE_REMINDER) if job.done_at is None]
    assert [job.due_at for job in pending] == [world.clock.now + timedelta(minutes=15)]


def test_snooze_moves_the_next_reminder_later(world) -> None:
    schedule_update_reminder(store=world.store, thread=THREAD, now=world.clock.now)
    world.store.postpone(
        kind=TaskKind.UPDATE_REMINDER, incident_key="INC-0001", until=world.clock.now + timedelta(hours=1)
    )
    world.clock.advance(timedelta(minutes=30))
    assert world.runner.run_due().ran == 0
    world.clock.advance(timedelta(minutes=30))
    assert world.runner.run_due().ran == 1


def test_an_incident_without_owner_nudges_the_commander_to_assign(world) -> None:
    import dataclasses

    world.directory.threads["INC-0001"] = dataclasses.replace(THREAD, owner=None)
    schedule_update_reminder(store=world.store, thread=THREAD, now=world.clock.now - timedelta(hours=1))
    world.runner.run_due()
    assert "Nobody owns this incident yet" in world.notifier.posts[-1].text


def test_reminders_stop_once_the_incident_is_resolved(world) -> None:
    import dataclasses

    world.directory.threads["INC-0001"] = dataclasses.replace(THREAD, status="resolved")
    schedule_update_reminder(store=world.store, thread=THREAD, now=world.clock.now - timedelta(hours=1))
    world.runner.run_due()
    assert world.notifier.posts == []
    assert all(job.done_at is not None for job in world.store.tasks(kind=TaskKind.UPDATE_REMINDER))


def _applied_change(world):
    outcome = world.changes.propose(
        incident_key="INC-0001",
        what="Scale to 2 replicas",
        variable="replicas",
        expected_effect="schedules",
        metric="scheduled pods",
        rollback_plan="scale to 4",
        approved_by="U_LEAD",
        proposed_by="U0BOB",
    )
    return world.changes.apply(change_id=outcome.change.id, actor="U0BOB").change


def test_validation_windows_rerun_the_snapshot_at_15_and_60_minutes_and_say_if_it_reproduces(world) -> None:
    change = _applied_change(world)
    assert len(schedule_validation_windows(store=world.store, change=change, applied_at=world.clock.now, requested_by="U0ALICE")) == 2
    assert schedule_validation_windows(store=world.store, change=change, applied_at=world.clock.now, requested_by="U0ALICE") == []
    world.clock.advance(timedelta(minutes=15))
    world.runner.run_due()
    assert "+15m" in world.notifier.posts[-1].text
    assert "STILL REPRODUCES: k8s.pending.insufficient_gpu" in world.notifier.posts[-1].text
    world.revalidator.current = frozenset({"k8s.image.pull_backoff"})
    world.clock.advance(timedelta(minutes=45))
    world.runner.run_due()
    assert "no longer reproduces" in world.notifier.posts[-1].text
    assert "New findings since the change: k8s.image.pull_backoff" in world.notifier.posts[-1].text
    results = [job.result for job in world.store.tasks(kind=TaskKind.VALIDATION_WINDOW)]
    assert [(item["window"], item["reproduces"]) for item in results] == [("+15m", True), ("+60m", False)]
    assert world.revalidator.calls == 2
    assert world.revalidator.requested_by == ["U0ALICE", "U0ALICE"]  # run as whoever applied the change


def test_an_open_prevention_action_reminds_its_owner_on_the_due_date(world) -> None:
    action = world.prevention.add(
        incident_key="INC-0001",
        description="Alert on quota drops",
        owner="U_CAROL",
        due_on=date(2026, 11, 22),
        guardrail_check="quota CI fails on a drop",
        actor="U0BOB",
    )
    schedule_prevention_followup(
        store=world.store, action_id=action.id, incident_key="INC-0001", due_on=action.due_on
    )
    world.clock.advance(timedelta(days=1))
    assert world.runner.run_due().ran == 0
    world.clock.advance(timedelta(days=1))
    world.runner.run_due()
    assert [post.where for post in world.notifier.posts] == ["dm:U_CAROL", "C1/111.222"]
    assert "quota CI fails on a drop" in world.notifier.posts[0].text


def test_the_weekly_digest_lists_overdue_actions_of_that_channel_and_requeues(world) -> None:
    world.prevention.add(
        incident_key="INC-0001",
        description="Alert on quota drops",
        owner="U_CAROL",
        due_on=date(2026, 11, 21),
        guardrail_check="quota CI",
        actor="U0BOB",
    )
    done = world.prevention.add(
        incident_key="INC-0001",
        description="Already fixed",
        owner="U_DAN",
        due_on=date(2026, 11, 21),
        guardrail_check="x",
        actor="U0BOB",
    )
    world.prevention.complete(action_id=done.id, actor="U_DAN")
    ensure_weekly_digest(store=world.store, channel="C1", now=world.clock.now)
    assert ensure_weekly_digest(store=world.store, channel="C1", now=world.clock.now) is None
    world.clock.advance(timedelta(days=7))
    world.runner.run_due()
    digest = world.notifier.posts[-1]
    assert (
        digest.where == "C1" and "Alert on quota drops" in digest.text and "Already fixed" not in digest.text
    )
    pending = [job for job in world.store.tasks(kind=TaskKind.WEEKLY_DIGEST) if job.done_at is None]
    assert [job.due_at for job in pending] == [world.clock.now + timedelta(days=7)]


def test_an_owner_who_updated_within_the_interval_is_not_nudged_until_the_interval_after_that(world) -> None:
    import dataclasses

    schedule_update_reminder(store=world.store, thread=THREAD, now=world.clock.now)
    world.clock.advance(timedelta(minutes=15))
    updated_at = world.clock.now - timedelta(minutes=5)
    world.directory.threads["INC-0001"] = dataclasses.replace(THREAD, last_update_at=updated_at)
    assert world.runner.run_due().ran == 1
    assert world.notifier.posts == []
    pending = [job for job in world.store.tasks(kind=TaskKind.UPDATE_REMINDER) if job.done_at is None]
    assert [job.due_at for job in pending] == [updated_at + timedelta(minutes=15)]
    world.clock.advance(timedelta(minutes=10))
    world.runner.run_due()
    assert "due an update" in world.notifier.posts[-1].text


def test_a_window_without_a_cluster_says_so_once_instead_of_retrying(world) -> None:
    from bot.schedule.tasks import RevalidationUnavailable

    def unavailable(*, incident_key: str, requested_by: str):
        raise RevalidationUnavailable("no cluster is configured for this bot")

    world.revalidator.revalidate = unavailable
    change = _applied_change(world)
    schedule_validation_windows(
        store=world.store, change=change, applied_at=world.clock.now - timedelta(hours=2), requested_by="U0ALICE"
    )
    summary = world.runner.run_due()
    assert (summary.ran, summary.failed) == (2, 0)
    assert "no fresh snapshot could be taken (no cluster is configured" in world.notifier.posts[-1].text
    assert all(job.result["unavailable"] for job in world.store.tasks(kind=TaskKind.VALIDATION_WINDOW))


def test_a_failing_layer_without_its_owner_is_named_in_the_reminder(world) -> None:
    import dataclasses

    world.directory.threads["INC-0001"] = dataclasses.replace(THREAD, unowned_layer="fabric")
    schedule_update_reminder(store=world.store, thread=THREAD, now=world.clock.now - timedelta(hours=1))
    world.runner.run_due()
    assert "`/triage assign @someone owner:fabric`" in world.notifier.posts[-1].text
