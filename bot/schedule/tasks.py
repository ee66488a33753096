"""What each scheduled job does: update reminders, validation windows, prevention follow-ups, digests."""

from __future__ import annotations

import dataclasses
import enum
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from bot import markup
from bot.changes.prevention import OPEN, PreventionService
from bot.changes.service import ChangeState, ChangeView
from bot.schedule.store import Button, Notifier, TaskContext, TaskHandler, TaskStore


class TaskKind(enum.StrEnum):
    """The kinds of durable job the bot schedules."""

    UPDATE_REMINDER = "update_reminder"
    VALIDATION_WINDOW = "validation_window"
    PREVENTION_FOLLOWUP = "prevention_followup"
    WEEKLY_DIGEST = "weekly_digest"
    PRUNE_PROCESSED_REQUESTS = "prune_processed_requests"


# How often the thread is nudged for an update, by incident severity (names from both common scales).
UPDATE_INTERVALS: Mapping[str, timedelta] = {
    "critical": timedelta(minutes=15),
    "sev1": timedelta(minutes=15),
    "high": timedelta(minutes=30),
    "sev2": timedelta(minutes=30),
    "medium": timedelta(hours=1),
    "sev3": timedelta(hours=1),
    "low": timedelta(hours=4),
    "sev4": timedelta(hours=4),
}
DEFAULT_UPDATE_INTERVAL = timedelta(hours=1)
VALIDATION_OFFSETS: tuple[timedelta, ...] = (timedelta(minutes=15), timedelta(minutes=60))
DIGEST_PERIOD = timedelta(days=7)
# Request fingerprints outlive Slack's retry window (minutes) by far; older ones are pruned daily.
PROCESSED_REQUEST_RETENTION = timedelta(days=1)
PRUNE_PERIOD = timedelta(days=1)
SNOOZE_ACTION_ID = "triage_snooze_reminder"
CLOSED_STATUSES = frozenset({"resolved", "closed"})


def update_interval(*, severity: str | None) -> timedelta:
    """The reminder interval for a severity; unknown severities get the default."""
    return UPDATE_INTERVALS.get((severity or "").strip().lower(), DEFAULT_UPDATE_INTERVAL)


def window_label(*, offset: timedelta) -> str:
    """`+15m`, `+60m`, `+2h` style labels."""
    minutes = int(offset.total_seconds() // 60)
    return f"+{minutes}m" if minutes <= 90 else f"+{minutes // 60}h"


@dataclasses.dataclass(frozen=True, kw_only=True)
class IncidentThread:
    """Where an incident lives in Slack and who answers for it; jobs need nothing more."""

    key: str
    channel: str
    thread_ts: str
    severity: str
    status: str
    owner: str | None = None
    commander: str | None = None
    last_update_at: datetime | None = None
    unowned_layer: str | None = None


class IncidentDirectory(Protocol):
    """Looks incidents up for jobs (implemented over the incident tables)."""

    def thread(self, *, incident_key: str) -> IncidentThread | None:
        """The incident's thread, or None when it no longer exists."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Revalidation:
    """The original snapshot's failing rules against a fresh snapshot's."""

    original_rules: frozenset[str]
    current_rules: frozenset[str]
    taken_at: datetime
    target: str = ""

    @property
    def still_reproduces(self) -> frozenset[str]:
        """Rules of the original failure that fire again."""
        return self.original_rules & self.current_rules

    @property
    def new_rules(self) -> frozenset[str]:
        """Rules firing now that did not before (a fix can break something else)."""
        return self.current_rules - self.original_rules


class RevalidationUnavailable(RuntimeError):
    """No fresh snapshot can be taken (no cluster configured); the window says so instead of retrying."""


class Revalidator(Protocol):
    """Re-runs the incident's snapshot and compares it with the original one."""

    def revalidate(self, *, incident_key: str, requested_by: str) -> Revalidation:
        """Take a fresh snapshot of the incident's target on behalf of whoever scheduled it."""


def ensure_update_reminder(*, store: TaskStore, thread: IncidentThread, now: datetime) -> int | None:
    """Queue a reminder unless one already waits (a repeated `/triage job` must not double the nudges)."""
    if store.has_pending(kind=TaskKind.UPDATE_REMINDER, incident_key=thread.key):
        return None
    return schedule_update_reminder(store=store, thread=thread, now=now)


def schedule_update_reminder(*, store: TaskStore, thread: IncidentThread, now: datetime) -> int | None:
    """Queue the next update reminder at the severity's interval."""
    return store.enqueue(
        kind=TaskKind.UPDATE_REMINDER,
        incident_key=thread.key,
        due_at=now + update_interval(severity=thread.severity),
        payload={"severity": thread.severity},
    )


def validation_prefix(*, change_id: int) -> str:
    """The dedupe-key prefix of one change's validation windows."""
    return f"validation:{change_id}:"


def schedule_validation_windows(
    *,
    store: TaskStore,
    change: ChangeView,
    applied_at: datetime,
    requested_by: str,
    offsets: tuple[timedelta, ...] = VALIDATION_OFFSETS,
) -> list[int]:
    """Queue one re-validation snapshot per offset after a change was applied (once per change and window);
    each remembers who applied the change, so the snapshot runs under that person's rights."""
    queued: list[int] = []
    for offset in offsets:
        label = window_label(offset=offset)
        job_id = store.enqueue(
            kind=TaskKind.VALIDATION_WINDOW,
            incident_key=change.incident_key,
            due_at=applied_at + offset,
            payload={"change_id": change.id, "window": label, "requested_by": requested_by},
            dedupe_key=f"{validation_prefix(change_id=change.id)}{label}",
        )
        if job_id is not None:
            queued.append(job_id)
    return queued


def schedule_prevention_followup(
    *, store: TaskStore, action_id: int, incident_key: str, due_on: date
) -> int | None:
    """Queue the owner's reminder for the morning (09:00 UTC) of the due date."""
    due_at = datetime(due_on.year, due_on.month, due_on.day, 9, tzinfo=store.clock().tzinfo)
    return store.enqueue(
        kind=TaskKind.PREVENTION_FOLLOWUP,
        incident_key=incident_key,
        due_at=due_at,
        payload={"action_id": action_id},
        dedupe_key=f"prevention:{action_id}",
    )


def ensure_weekly_digest(*, store: TaskStore, channel: str, now: datetime) -> int | None:
    """Queue the channel's digest for the coming week unless one is queued already."""
    year, week, _ = (now + DIGEST_PERIOD).isocalendar()
    return store.enqueue(
        kind=TaskKind.WEEKLY_DIGEST,
        due_at=now + DIGEST_PERIOD,
        payload={"channel": channel},
        dedupe_key=f"digest:{channel}:{year}-W{week:02d}",
    )


def ensure_daily_prune(*, store: TaskStore, now: datetime, due_at: datetime | None = None) -> int | None:
    """Queue the idempotency table's housekeeping for `due_at` (default now) unless that day's is queued."""
    when = due_at or now
    return store.enqueue(
        kind=TaskKind.PRUNE_PROCESSED_REQUESTS, due_at=when, dedupe_key=f"prune:{when.date().isoformat()}"
    )


def build_handlers(
    *,
    notifier: Notifier,
    directory: IncidentDirectory,
    revalidator: Revalidator,
    prevention: PreventionService,
    change_lookup: Callable[[int], ChangeView],
    prune_requests: Callable[..., int] | None = None,
) -> dict[str, TaskHandler]:
    """The handler per job kind, closed over what they need."""

    def update_reminder(context: TaskContext) -> dict[str, Any] | None:
        """Nudge the thread (and the owner) for an update, then queue the next one."""
        thread = directory.thread(incident_key=context.job.incident_key or "")
        if thread is None or thread.status in CLOSED_STATUSES:
            return {"skipped": "incident closed or gone"}
        interval = update_interval(severity=thread.severity)
        if (
            thread.owner
            and thread.last_update_at is not None
            and context.now - thread.last_update_at < interval
        ):
            # The incident moved recently: no nudge; look again one interval after that update.
            context.store.enqueue(
                kind=TaskKind.UPDATE_REMINDER,
                incident_key=thread.key,
                due_at=thread.last_update_at + interval,
                payload={"severity": thread.severity},
            )
            return {"skipped": "updated recently", "last_update_at": thread.last_update_at.isoformat()}
        who = (
            markup.mention(thread.owner)
            if thread.owner
            else markup.Mrkdwn("Nobody owns this incident yet: commander, please `/triage assign`.")
        )
        if thread.unowned_layer:
            who += markup.format(
                " The failing layer ({}) has no owner: `/triage assign @someone owner:{}`.",
                thread.unowned_layer,
                thread.unowned_layer,
            )
        notifier.post_thread(
            channel=thread.channel,
            thread_ts=thread.thread_ts,
            text=markup.format(
                "{} {} ({}) is due an update: post what changed, what you see now and the next action. "
                "Next reminder in {} min.",
                who,
                thread.key,
                thread.severity,
                int(interval.total_seconds() // 60),
            ),
            buttons=(Button(label="Snooze 1h", action_id=SNOOZE_ACTION_ID, value=thread.key),),
        )
        schedule_update_reminder(store=context.store, thread=thread, now=context.now)
        return {"reminded": thread.owner or "", "severity": thread.severity}

    def validation_window(context: TaskContext) -> dict[str, Any] | None:
        """Re-run the snapshot and say whether the original failure still reproduces."""
        key = context.job.incident_key or ""
        change = change_lookup(int(context.job.payload["change_id"]))
        window = str(context.job.payload.get("window", ""))
        if change.state is ChangeState.ROLLED_BACK:
            return None  # nothing left to validate; kept out of the recurrence check
        thread = directory.thread(incident_key=key)
        try:
            # A window queued before requesters were recorded has none: it runs as nobody, so an allow-list
            # refuses it rather than letting it read the cluster as the bot.
            requested_by = str(context.job.payload.get("requested_by") or "unknown")
            outcome = revalidator.revalidate(incident_key=key, requested_by=requested_by)
        except RevalidationUnavailable as error:
            if thread is not None:
                notifier.post_thread(
                    channel=thread.channel,
                    thread_ts=thread.thread_ts,
                    text=markup.format(
                        "Validation window {} for change #{}: no fresh snapshot could be taken ({}). Re-run the "
                        "failing comparison by hand and record it with `/triage measure`.",
                        window,
                        change.id,
                        markup.of_error(error),
                    ),
                )
            return {"change_id": change.id, "window": window, "unavailable": str(error)}
        if outcome.still_reproduces:
            verdict = "The original failure STILL REPRODUCES: " + ", ".join(sorted(outcome.still_reproduces))
        else:
            verdict = "The original failure no longer reproduces."
        if outcome.new_rules:
            verdict += " New findings since the change: " + ", ".join(sorted(outcome.new_rules)) + "."
        if thread is not None:
            notifier.post_thread(
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                text=markup.format("Validation window {} for change #{} ({}): {}", window, change.id, change.variable, verdict),
            )
        return {
            "change_id": change.id,
            "window": window,
            "reproduces": bool(outcome.still_reproduces),
            "still_reproducing_rules": sorted(outcome.still_reproduces),
            "new_rules": sorted(outcome.new_rules),
            "original_rules": sorted(outcome.original_rules),
            "taken_at": outcome.taken_at.isoformat(),
            "verdict": verdict,
        }

    def prevention_followup(context: TaskContext) -> dict[str, Any] | None:
        """Remind the owner of an open prevention action on its due date."""
        action_id = int(context.job.payload["action_id"])
        actions = {
            item.id: item for item in prevention.for_incident(incident_key=context.job.incident_key or "")
        }
        action = actions.get(action_id)
        if action is None or action.status != OPEN:
            return {"skipped": "action closed or gone"}
        text = markup.format(
            "Prevention action #{} from {} is due {}: {}. Done when this guardrail check passes: {}",
            action.id,
            action.incident_key,
            action.due_on.isoformat(),
            action.description,
            action.guardrail_check,
        )
        notifier.post_direct(user=action.owner, text=text)
        thread = directory.thread(incident_key=action.incident_key)
        if thread is not None:
            notifier.post_thread(
                channel=thread.channel, thread_ts=thread.thread_ts, text=markup.mention(action.owner) + " " + text
            )
        return {"reminded": action.owner}

    def weekly_digest(context: TaskContext) -> dict[str, Any] | None:
        """List overdue prevention actions of this channel's incidents, then queue next week's."""
        channel = str(context.job.payload["channel"])
        by_channel: dict[str, list[markup.Mrkdwn]] = defaultdict(list)
        for action in prevention.overdue(today=context.now.date()):
            thread = directory.thread(incident_key=action.incident_key)
            if thread is not None:
                by_channel[thread.channel].append(
                    markup.format(
                        "- {} #{} {} due {}: {}",
                        action.incident_key,
                        action.id,
                        markup.mention(action.owner),
                        action.due_on.isoformat(),
                        action.description,
                    )
                )
        lines = by_channel.get(channel, [])
        if lines:
            notifier.post_channel(
                channel=channel, text=markup.format("Overdue prevention actions this week:\n{}", markup.lines(lines))
            )
        ensure_weekly_digest(store=context.store, channel=channel, now=context.now)
        return {"overdue": len(lines)}

    def prune_processed_requests(context: TaskContext) -> dict[str, Any] | None:
        """Keep the exactly-once table bounded: forget fingerprints past the retention, then queue tomorrow's."""
        pruned = 0 if prune_requests is None else prune_requests(older_than=context.now - PROCESSED_REQUEST_RETENTION)
        ensure_daily_prune(store=context.store, now=context.now, due_at=context.now + PRUNE_PERIOD)
        return {"pruned": pruned}

    return {
        TaskKind.PRUNE_PROCESSED_REQUESTS.value: prune_processed_requests,
        TaskKind.UPDATE_REMINDER.value: update_reminder,
        TaskKind.VALIDATION_WINDOW.value: validation_window,
        TaskKind.PREVENTION_FOLLOWUP.value: prevention_followup,
        TaskKind.WEEKLY_DIGEST.value: weekly_digest,
    }
