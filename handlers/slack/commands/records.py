"""The records area's `/triage` subcommands: change, measure, handoff, postmortem, prevent, and the
commander-only resolve, reopen and severity; job, status and assign wrap the foundation's own."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from bot.changes.prevention import parse_prevent_args
from bot.changes.service import ChangeError, parse_change_text, parse_value_with_unit
from bot.incidents.policy import PermissionRefused, parse_role
from bot.incidents.service import IncidentError, IncidentView
from bot.records.sources import thread_of
from bot.schedule.tasks import (
    JobKind,
    ensure_update_reminder,
    ensure_weekly_digest,
    schedule_prevention_followup,
    schedule_update_reminder,
)
from handlers.slack.blocks import changes as records_views
from handlers.slack.blocks import common as blocks
from handlers.slack.commands.incident import default_subcommands
from handlers.slack.records_area import RecordsArea
from handlers.slack.replies import (
    POSTMORTEM_ACTION,
    after_change_state,
    assign,
    post,
    post_handoff,
    post_postmortem,
    require_incident_commander,
    upload_chart,
)
from handlers.slack.router import INCIDENT_KEY, USER_MENTION, CommandContext, Subcommand, UsageError


def _incident_and_words(ctx: CommandContext) -> tuple[IncidentView, list[str]]:
    incident, rest = ctx.incident_and_rest()
    return incident, rest.split()


def _user_errors(run: Callable[[CommandContext], None]) -> Callable[[CommandContext], None]:
    """The records' refusals become the router's UsageError, so the user gets them as an ephemeral reply."""

    def wrapped(ctx: CommandContext) -> None:
        try:
            run(ctx)
        except (ChangeError, PermissionRefused) as error:
            raise UsageError(str(error)) from None

    return wrapped


def subcommands(area: RecordsArea) -> list[Subcommand]:
    base = {item.name: item for item in default_subcommands()}

    def run_job(ctx: CommandContext) -> None:
        base["job"].run(ctx)
        try:
            incident = ctx.services.incidents.open_in_channel(channel_id=ctx.channel_id)
        except IncidentError:
            return
        first_time = ensure_update_reminder(store=area.jobs, thread=thread_of(incident), now=area.clock())
        ensure_weekly_digest(store=area.jobs, channel=incident.channel_id, now=area.clock())
        if first_time is not None and not incident.holders("owner") and incident.thread_ts:
            post(
                ctx.client,
                incident,
                text=f"Who owns {incident.key}? Pick an owner:",
                blocks_=[
                    blocks.section(
                        f"Who owns *{incident.key}*? Pick an owner; they get a DM saying what is expected."
                    ),
                    records_views.assign_owner_block(incident_key=incident.key),
                ],
            )

    def check_assign(rest: str) -> None:
        words = rest.split()
        if words and INCIDENT_KEY.match(words[0]):
            words = words[1:]
        if len(words) != 2 or not USER_MENTION.match(words[0]):
            raise UsageError("Type `/triage assign @person <commander|owner|scribe|observer|owner:<layer>>`.")
        try:
            parse_role(text=words[1])
        except ValueError as error:
            raise UsageError(str(error)) from None

    def run_assign(ctx: CommandContext) -> None:
        incident, words = _incident_and_words(ctx)
        match = USER_MENTION.match(words[0])
        assert match is not None  # checked before the ack
        assign(
            services=ctx.services,
            area=area,
            client=ctx.client,
            incident=incident,
            user_id=match.group(1),
            role=words[1],
            actor=ctx.user_id,
        )

    def run_change(ctx: CommandContext) -> None:
        incident, rest = ctx.incident_and_rest()
        words = rest.split()
        if len(words) == 2 and words[0].lstrip("#").isdigit():
            _change_state(ctx, change_id=int(words[0].lstrip("#")), state=words[1])
            return
        if rest:
            outcome = area.changes.propose(
                incident_key=incident.key,
                proposed_by=ctx.user_id,
                approved_by="",
                **dataclasses.asdict(parse_change_text(text=rest)),
            )
            post(
                ctx.client,
                incident,
                text=f"<@{ctx.user_id}> proposed change #{outcome.change.id}: {outcome.change.what}",
                blocks_=records_views.change_blocks(change=outcome.change, warning=outcome.warning),
            )
            return
        if not ctx.trigger_id:
            raise UsageError("Slack sent no trigger to open the change form; run `/triage change` again.")
        ctx.client.views_open(
            trigger_id=ctx.trigger_id,
            view=records_views.change_modal(
                incident_key=incident.key, channel=incident.channel_id, thread_ts=incident.thread_ts or ""
            ),
        )

    def check_measure(rest: str) -> None:
        words = rest.split()
        if words and INCIDENT_KEY.match(words[0]):
            words = words[1:]
        if len(words) < 3:
            raise UsageError(
                "Type `/triage measure <change#> <window> <value><unit>`, e.g. "
                "`/triage measure 3 +15m 182GB/s`."
            )
        try:
            records_views.parse_change_id(text=words[0])
            parse_value_with_unit(text=" ".join(words[2:]))
        except ChangeError as error:
            raise UsageError(str(error)) from None

    def run_measure(ctx: CommandContext) -> None:
        words = ctx.rest.split()
        if words and INCIDENT_KEY.match(words[0]):
            words = words[1:]
        change_id = records_views.parse_change_id(text=words[0])
        value, unit = parse_value_with_unit(text=" ".join(words[2:]))
        change = area.changes.measure(
            change_id=change_id, window=words[1], value=value, unit=unit, actor=ctx.user_id
        )
        incident = ctx.services.incidents.get(incident_key=change.incident_key)
        post(
            ctx.client,
            incident,
            text=f"Change #{change.id}: {words[1]} measured {value:g} {unit}",
            blocks_=records_views.change_blocks(change=change),
        )
        upload_chart(ctx.client, incident, change)

    def run_handoff(ctx: CommandContext) -> None:
        incident, _ = _incident_and_words(ctx)
        post_handoff(
            services=ctx.services,
            area=area,
            client=ctx.client,
            incident_key=incident.key,
            reason=f"requested by <@{ctx.user_id}>",
        )

    def run_postmortem(ctx: CommandContext) -> None:
        incident, _ = _incident_and_words(ctx)
        post_postmortem(services=ctx.services, area=area, client=ctx.client, incident_key=incident.key)

    def _change_state(ctx: CommandContext, *, change_id: int, state: str) -> None:
        operations = {
            "applied": area.changes.apply,
            "validated": area.changes.validate,
            "rolled-back": area.changes.roll_back,
            "rolled_back": area.changes.roll_back,
            "rollback": area.changes.roll_back,
        }
        operation = operations.get(state.lower())
        if operation is None:
            raise UsageError("Type `/triage change <n> applied|validated|rolled-back`.")
        outcome = operation(change_id=change_id, actor=ctx.user_id)
        after_change_state(
            area=area, client=ctx.client, incidents=ctx.services.incidents, user=ctx.user_id, outcome=outcome
        )

    def run_status(ctx: CommandContext) -> None:
        incident, words = _incident_and_words(ctx)
        if words and words[-1].lower() == "resolved":
            require_incident_commander(ctx.services, incident, actor=ctx.user_id, action="resolve")
        base["status"].run(ctx)
        if words and words[-1].lower() == "resolved":
            _after_resolve(ctx, ctx.services.incidents.get(incident_key=incident.key))

    def _after_resolve(ctx: CommandContext, updated: IncidentView) -> None:
        area.jobs.cancel(kind=JobKind.UPDATE_REMINDER, incident_key=updated.key)
        post(
            ctx.client,
            updated,
            text=f"{updated.key} is resolved. Write the postmortem?",
            blocks_=[
                blocks.section(
                    f"*{updated.key}* is resolved. A resolved incident is not complete until "
                    "root cause, remediation and prevention are in one record."
                ),
                {
                    "type": "actions",
                    "elements": [
                        blocks.button(
                            text="Write postmortem",
                            action_id=POSTMORTEM_ACTION,
                            value=updated.key,
                            style="primary",
                        )
                    ],
                },
            ],
        )

    def run_resolve(ctx: CommandContext) -> None:
        incident, words = _incident_and_words(ctx)
        require_incident_commander(ctx.services, incident, actor=ctx.user_id, action="resolve")
        if incident.status == "resolved":
            raise UsageError(f"{incident.key} is already resolved.")
        if words:
            ctx.services.incidents.add_note(
                incident_key=incident.key, text="remediation: " + " ".join(words), actor=ctx.user_id
            )
        updated = ctx.services.incidents.set_status(
            incident_key=incident.key, status="resolved", actor=ctx.user_id
        )
        post(ctx.client, updated, text=f"<@{ctx.user_id}> resolved {updated.key}.")
        _after_resolve(ctx, updated)
        ctx.refresh_root(updated)

    def run_reopen(ctx: CommandContext) -> None:
        incident, _ = _incident_from_key_or_latest(ctx)
        require_incident_commander(ctx.services, incident, actor=ctx.user_id, action="reopen")
        reopened = ctx.services.incidents.reopen(incident_key=incident.key, actor=ctx.user_id)
        post(ctx.client, reopened, text=f"<@{ctx.user_id}> reopened {reopened.key}.")
        schedule_update_reminder(store=area.jobs, thread=thread_of(reopened), now=area.clock())
        ctx.refresh_root(reopened)

    def check_severity(rest: str) -> None:
        if not rest.split():
            raise UsageError("Type `/triage severity <critical|high|medium|low|info>`.")

    def run_severity(ctx: CommandContext) -> None:
        incident, words = _incident_and_words(ctx)
        require_incident_commander(ctx.services, incident, actor=ctx.user_id, action="change the severity of")
        updated = ctx.services.incidents.set_severity(
            incident_key=incident.key, severity=words[-1], actor=ctx.user_id
        )
        area.jobs.cancel(kind=JobKind.UPDATE_REMINDER, incident_key=incident.key)
        schedule_update_reminder(store=area.jobs, thread=thread_of(updated), now=area.clock())
        post(
            ctx.client,
            updated,
            text=f"<@{ctx.user_id}> changed the severity of {incident.key} from "
            f"{incident.severity or 'unknown'} to *{updated.severity}*; update reminders follow the new interval.",
        )
        ctx.refresh_root(updated)

    def check_prevent(rest: str) -> None:
        words = rest.split(maxsplit=1)
        text = words[1] if words and INCIDENT_KEY.match(words[0]) and len(words) > 1 else rest
        try:
            parse_prevent_args(text=text)
        except ChangeError as error:
            raise UsageError(str(error)) from None

    def run_prevent(ctx: CommandContext) -> None:
        incident, rest = ctx.incident_and_rest()
        owner, due_on, description, guardrail = parse_prevent_args(text=rest)
        action = area.prevention.add(
            incident_key=incident.key,
            description=description,
            owner=owner,
            due_on=due_on,
            guardrail_check=guardrail,
            actor=ctx.user_id,
        )
        schedule_prevention_followup(
            store=area.jobs, action_id=action.id, incident_key=incident.key, due_on=due_on
        )
        ensure_weekly_digest(store=area.jobs, channel=incident.channel_id, now=area.clock())
        post(
            ctx.client,
            incident,
            text=f":shield: Prevention #{action.id} for <@{owner}>, due {due_on.isoformat()}: "
            f"{description}. Guardrail check: {guardrail}",
        )

    listed = [
        Subcommand(
            name="job",
            usage=base["job"].usage,
            summary=base["job"].summary,
            run=run_job,
            check=base["job"].check,
            working_text=base["job"].working_text,
        ),
        Subcommand(
            name="assign",
            usage="assign [INC-n] @person <role>",
            summary="roles: commander, owner, scribe, observer, owner:<layer>; the person gets a DM",
            run=run_assign,
            check=check_assign,
        ),
        Subcommand(
            name="status",
            usage=base["status"].usage,
            summary=base["status"].summary + " (resolved: commander)",
            run=run_status,
            check=base["status"].check,
        ),
        Subcommand(
            name="change",
            usage="change [INC-n] [<variable> | <what> | <effect> | <metric> | <rollback>]",
            summary="record a change (form, or one line); `change <n> applied|validated|rolled-back`",
            run=run_change,
        ),
        Subcommand(
            name="measure",
            usage="measure [INC-n] <change#> <window> <value><unit>",
            summary="attach a measurement to a change",
            run=run_measure,
            check=check_measure,
        ),
        Subcommand(
            name="handoff",
            usage="handoff [INC-n]",
            summary="post the handoff (thread + Markdown file)",
            run=run_handoff,
        ),
        Subcommand(
            name="postmortem",
            usage="postmortem [INC-n]",
            summary="write the postmortem (Markdown file)",
            run=run_postmortem,
        ),
        Subcommand(
            name="resolve",
            usage="resolve [INC-n] [remediation]",
            summary="commander only: resolve",
            run=run_resolve,
        ),
        Subcommand(
            name="reopen",
            usage="reopen INC-n",
            summary="commander only: reopen a resolved incident",
            run=run_reopen,
        ),
        Subcommand(
            name="severity",
            usage="severity [INC-n] <critical|high|medium|low|info>",
            summary="commander only: set severity (and the reminder interval)",
            run=run_severity,
            check=check_severity,
        ),
        Subcommand(
            name="prevent",
            usage="prevent [INC-n] @owner YYYY-MM-DD <action> | <guardrail check>",
            summary="add a prevention action",
            run=run_prevent,
            check=check_prevent,
        ),
    ]
    return [dataclasses.replace(item, run=_user_errors(item.run)) for item in listed]


def _incident_from_key_or_latest(ctx: CommandContext) -> tuple[IncidentView, str]:
    first, _, remainder = ctx.rest.strip().partition(" ")
    if INCIDENT_KEY.match(first):
        return ctx.services.incidents.get(incident_key=first.upper()), remainder
    raise UsageError("Type `/triage reopen INC-n`: a resolved incident is no longer the channel's open one.")
