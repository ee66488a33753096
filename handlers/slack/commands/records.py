"""`/triage` subcommands of the incident's record: change, measure, handoff, postmortem, prevent, and the
commander's resolve, reopen and severity (the core's rulebook refuses anyone else)."""

from __future__ import annotations

import dataclasses

from bot.changes.prevention import parse_prevent_args
from bot.changes.service import (
    ChangeError,
    parse_baseline_and_threshold,
    parse_change_text,
    parse_value_with_unit,
)
from bot.incidents.service import IncidentView
from bot.records.sources import thread_of
from bot.schedule.tasks import (
    TaskKind,
    ensure_weekly_digest,
    schedule_prevention_followup,
    schedule_update_reminder,
)
from handlers.slack import replies
from handlers.slack.blocks import changes as change_blocks
from handlers.slack.commands.incident import after_resolve
from handlers.slack.router import INCIDENT_KEY, CommandContext, Subcommand, UsageError

CHANGE_STATES = ("applied", "validated", "rolled-back", "rolled_back", "rollback")


def _incident_and_words(ctx: CommandContext) -> tuple[IncidentView, list[str]]:
    incident, rest = ctx.incident_and_rest()
    return incident, rest.split()


def _without_key(rest: str) -> list[str]:
    words = rest.split()
    return words[1:] if words and INCIDENT_KEY.match(words[0]) else words


# --- change, measure -------------------------------------------------------------------------------


def _run_change(ctx: CommandContext) -> None:
    core = ctx.services.core
    incident, rest = ctx.incident_and_rest()
    words = rest.split()
    if len(words) == 2 and words[0].lstrip("#").isdigit():
        change_state(ctx, change_id=int(words[0].lstrip("#")), state=words[1])
        return
    if rest:
        outcome = core.changes.propose(
            incident_key=incident.key,
            proposed_by=ctx.user_id,
            approved_by="",
            **dataclasses.asdict(parse_change_text(text=rest)),
        )
        ctx.post_in_thread(
            incident,
            text=f"<@{ctx.user_id}> proposed change #{outcome.change.id}: {outcome.change.what}",
            blocks_=change_blocks.change_blocks(change=outcome.change, warning=outcome.warning),
        )
        return
    if not ctx.trigger_id:
        raise UsageError("Slack sent no trigger to open the change form; run `/triage change` again.")
    ctx.client.views_open(
        trigger_id=ctx.trigger_id,
        view=change_blocks.change_modal(
            incident_key=incident.key, channel=incident.channel_id, thread_ts=incident.thread_ts or ""
        ),
    )


def change_state(ctx: CommandContext, *, change_id: int, state: str) -> None:
    """`/triage change <n> applied|validated|rolled-back`."""
    changes = ctx.services.core.changes
    operations = {
        "applied": changes.apply,
        "validated": changes.validate,
        "rolled-back": changes.roll_back,
        "rolled_back": changes.roll_back,
        "rollback": changes.roll_back,
    }
    operation = operations.get(state.lower())
    if operation is None:
        raise UsageError("Type `/triage change <n> applied|validated|rolled-back`.")
    outcome = operation(change_id=change_id, actor=ctx.user_id)
    replies.after_change_state(core=ctx.services.core, client=ctx.client, user=ctx.user_id, outcome=outcome)


MEASURE_USAGE = (
    "Type `/triage measure <change#> <window> <value><unit> [vs <baseline> -> <threshold>]`, e.g. "
    "`/triage measure 3 +15m 182GB/s` (or `... vs 120 -> 170` when the change has no baseline yet)."
)


def _parse_measure(rest: str) -> tuple[int, str, float, str, float | None, float | None]:
    """(change id, window, value, unit, baseline, threshold) of `measure`; baseline and threshold are optional."""
    words = _without_key(rest)
    if len(words) < 3:
        raise UsageError(MEASURE_USAGE)
    reading, _, target = " ".join(words[2:]).partition(" vs ")
    try:
        change_id = change_blocks.parse_change_id(text=words[0])
        value, unit = parse_value_with_unit(text=reading)
        baseline, threshold = parse_baseline_and_threshold(text=target) if target.strip() else (None, None)
    except ChangeError as error:
        raise UsageError(f"{error} {MEASURE_USAGE}") from None
    return change_id, words[1], value, unit, baseline, threshold


def _check_measure(rest: str) -> None:
    _parse_measure(rest)


def _run_measure(ctx: CommandContext) -> None:
    change_id, window, value, unit, baseline, threshold = _parse_measure(ctx.rest)
    change = ctx.services.core.changes.measure(
        change_id=change_id, window=window, value=value, unit=unit, actor=ctx.user_id,
        baseline=baseline, threshold=threshold,
    )
    incident = ctx.services.incidents.get(incident_key=change.incident_key)
    ctx.post_in_thread(
        incident,
        text=f"Change #{change.id}: {window} measured {value:g} {unit}",
        blocks_=change_blocks.change_blocks(change=change),
    )
    replies.upload_chart(ctx.client, incident, change)


# --- handoff, postmortem ---------------------------------------------------------------------------


def _run_handoff(ctx: CommandContext) -> None:
    incident, _ = _incident_and_words(ctx)
    replies.post_handoff(
        core=ctx.services.core, client=ctx.client, incident_key=incident.key, reason=f"requested by <@{ctx.user_id}>"
    )


def _run_postmortem(ctx: CommandContext) -> None:
    incident, _ = _incident_and_words(ctx)
    replies.post_postmortem(core=ctx.services.core, client=ctx.client, incident_key=incident.key)


# --- resolve, reopen, severity (commander) ---------------------------------------------------------


def _run_resolve(ctx: CommandContext) -> None:
    incident, words = _incident_and_words(ctx)
    if incident.status == "resolved":
        raise UsageError(f"{incident.key} is already resolved.")
    updated = ctx.services.incidents.set_status(incident_key=incident.key, status="resolved", actor=ctx.user_id)
    if words:
        ctx.services.incidents.add_note(
            incident_key=incident.key, text="remediation: " + " ".join(words), actor=ctx.user_id
        )
    ctx.post_in_thread(updated, text=f"<@{ctx.user_id}> resolved {updated.key}.")
    after_resolve(ctx, updated)
    ctx.refresh_root(updated)


def _run_reopen(ctx: CommandContext) -> None:
    first, _, _remainder = ctx.rest.strip().partition(" ")
    if not INCIDENT_KEY.match(first):
        raise UsageError("Type `/triage reopen INC-n`: a resolved incident is no longer the channel's open one.")
    core = ctx.services.core
    reopened = core.incidents.reopen(incident_key=first.upper(), actor=ctx.user_id)
    ctx.post_in_thread(reopened, text=f"<@{ctx.user_id}> reopened {reopened.key}.")
    schedule_update_reminder(store=core.tasks, thread=thread_of(reopened), now=core.clock())
    ctx.refresh_root(reopened)


def _check_severity(rest: str) -> None:
    if not rest.split():
        raise UsageError("Type `/triage severity <critical|high|medium|low|info>`.")


def _run_severity(ctx: CommandContext) -> None:
    core = ctx.services.core
    incident, words = _incident_and_words(ctx)
    updated = core.incidents.set_severity(incident_key=incident.key, severity=words[-1], actor=ctx.user_id)
    core.tasks.cancel(kind=TaskKind.UPDATE_REMINDER, incident_key=incident.key)
    schedule_update_reminder(store=core.tasks, thread=thread_of(updated), now=core.clock())
    ctx.post_in_thread(
        updated,
        text=f"<@{ctx.user_id}> changed the severity of {incident.key} from "
        f"{incident.severity or 'unknown'} to *{updated.severity}*; update reminders follow the new interval.",
    )
    ctx.refresh_root(updated)


# --- prevent ---------------------------------------------------------------------------------------


def _check_prevent(rest: str) -> None:
    words = rest.split(maxsplit=1)
    text = words[1] if words and INCIDENT_KEY.match(words[0]) and len(words) > 1 else rest
    try:
        parse_prevent_args(text=text)
    except ChangeError as error:
        raise UsageError(str(error)) from None


def _run_prevent(ctx: CommandContext) -> None:
    core = ctx.services.core
    incident, rest = ctx.incident_and_rest()
    owner, due_on, description, guardrail = parse_prevent_args(text=rest)
    action = core.prevention.add(
        incident_key=incident.key,
        description=description,
        owner=owner,
        due_on=due_on,
        guardrail_check=guardrail,
        actor=ctx.user_id,
    )
    schedule_prevention_followup(store=core.tasks, action_id=action.id, incident_key=incident.key, due_on=due_on)
    ensure_weekly_digest(store=core.tasks, channel=incident.channel_id, now=core.clock())
    ctx.post_in_thread(
        incident,
        text=f":shield: Prevention #{action.id} for <@{owner}>, due {due_on.isoformat()}: "
        f"{description}. Guardrail check: {guardrail}",
    )


SUBCOMMANDS = (
    Subcommand(
        name="change",
        usage="change [INC-n] [<variable> | <what> | <effect> | <metric> | <rollback>]",
        summary="record a change (form, or one line); `change <n> applied|validated|rolled-back`",
        run=_run_change,
    ),
    Subcommand(
        name="measure",
        usage="measure [INC-n] <change#> <window> <value><unit> [vs <baseline> -> <threshold>]",
        summary="attach a measurement to a change",
        run=_run_measure,
        check=_check_measure,
    ),
    Subcommand(name="handoff", usage="handoff [INC-n]", summary="post the handoff (thread + Markdown file)",
               run=_run_handoff),
    Subcommand(name="postmortem", usage="postmortem [INC-n]", summary="write the postmortem (Markdown file)",
               run=_run_postmortem),
    Subcommand(name="resolve", usage="resolve [INC-n] [remediation]", summary="commander only: resolve",
               run=_run_resolve),
    Subcommand(name="reopen", usage="reopen INC-n", summary="commander only: reopen a resolved incident",
               run=_run_reopen),
    Subcommand(
        name="severity",
        usage="severity [INC-n] <critical|high|medium|low|info>",
        summary="commander only: set severity (and the reminder interval)",
        run=_run_severity,
        check=_check_severity,
    ),
    Subcommand(
        name="prevent",
        usage="prevent [INC-n] @owner YYYY-MM-DD <action> | <guardrail check>",
        summary="add a prevention action",
        run=_run_prevent,
        check=_check_prevent,
    ),
)
