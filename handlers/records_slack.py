"""Slack for the records area: changes (modal, buttons, measurements), handoff, postmortem, prevention,
commander-only lifecycle steps, ownership with DMs, and the scheduler's snooze button."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import bundle, charts, findings, records
from bot.changes import (
    ChangeError,
    ChangeOutcome,
    ChangeState,
    ChangeView,
    parse_change_text,
    parse_value_with_unit,
)
from bot.incidents import IncidentError, IncidentView
from bot.job_kinds import (
    SNOOZE_ACTION_ID,
    JobKind,
    ensure_weekly_digest,
    schedule_prevention_followup,
    schedule_update_reminder,
    schedule_validation_windows,
    validation_prefix,
)
from bot.ownership import PermissionRefused, parse_role, require_commander, role_expectations
from bot.prevention import parse_prevent_args
from bot.record_sources import reopen, set_severity, thread_of
from handlers import blocks, records_views
from handlers.commands import (
    INCIDENT_KEY,
    USER_MENTION,
    CommandContext,
    Subcommand,
    UsageError,
)
from handlers.incident_subcommands import default_subcommands
from handlers.records_area import RecordsArea, build_area
from handlers.services import Services
from handlers.slack_app import make_web_client

log = logging.getLogger(__name__)

SNOOZE = timedelta(hours=1)
POSTMORTEM_ACTION = "triage_write_postmortem"
HANDOFF_ROLES = frozenset({"owner", "commander"})


def install(
    services: Services, *, clock: Callable[[], datetime] = findings.utcnow, client: WebClient | None = None
) -> RecordsArea:
    """Build the area, hook its listeners into the app and hand the scheduler to the server."""
    area = build_area(services=services, client=client or make_web_client(settings=services.settings), clock=clock)
    services.extra_registrations.append(lambda app, svc: register(app, svc, area))
    services.scheduler = area.scheduler
    if services.settings.scheduler_enabled:
        area.scheduler.start()
    return area


# --- shared steps -------------------------------------------------------------------------------------


def _post(client: WebClient, incident: IncidentView, *, text: str, blocks_: list[dict[str, Any]] | None = None) -> str:
    kwargs: dict[str, Any] = {"channel": incident.channel_id, "text": blocks.clip(text, limit=3900)}
    if incident.thread_ts:
        kwargs["thread_ts"] = incident.thread_ts
    if blocks_:
        kwargs["blocks"] = blocks.validate_blocks(blocks_)
    return str(client.chat_postMessage(**kwargs)["ts"])


def post_handoff(*, services: Services, area: RecordsArea, client: WebClient, incident_key: str, reason: str) -> str:
    """The handoff as a thread reply and a Markdown file; returns the Markdown."""
    incident = services.incidents.get(incident_key=incident_key)
    record = records.build_handoff(data=area.incident_data(incidents=services.incidents, incident_key=incident_key),
                                   now=area.clock())
    markdown = records.render_handoff(record=record)
    _post(client, incident, text=f":page_facing_up: Handoff for {incident.key} ({reason})\n{markdown}")
    client.files_upload_v2(
        channel=incident.channel_id, thread_ts=incident.thread_ts, filename=f"{incident.key}-handoff.md",
        content=markdown.encode(), title=f"{incident.key} handoff",
    )
    services.incidents.add_timeline_entry(incident_key=incident.key, actor="triage-bot", kind="handoff",
                                          text=f"Handoff posted ({reason})")
    return markdown


def post_postmortem(*, services: Services, area: RecordsArea, client: WebClient, incident_key: str) -> str:
    """The postmortem as a Markdown file in the thread, with each change's chart beside it."""
    incident = services.incidents.get(incident_key=incident_key)
    data = area.incident_data(incidents=services.incidents, incident_key=incident_key)
    markdown = records.render_postmortem(record=records.build_postmortem(data=data, now=area.clock()))
    client.files_upload_v2(
        channel=incident.channel_id, thread_ts=incident.thread_ts, filename=f"{incident.key}-postmortem.md",
        content=markdown.encode(), title=f"{incident.key} postmortem",
        initial_comment=f":memo: Postmortem for {incident.key}. Fill any _not recorded_ section with "
        "`/triage note summary: ...`, `impact:`, `root cause:`, `remediation:` and run `/triage postmortem` again.",
    )
    for path, png in bundle.chart_files(data=data).items():
        client.files_upload_v2(channel=incident.channel_id, thread_ts=incident.thread_ts,
                               filename=path.rsplit("/", 1)[-1], content=png, title=path)
    services.incidents.add_timeline_entry(incident_key=incident.key, actor="triage-bot", kind="postmortem",
                                          text="Postmortem written")
    return markdown


def _commanders(incident: IncidentView) -> tuple[str, ...]:
    return incident.holders("commander")


def _require_commander(ctx_services: Services, incident: IncidentView, *, actor: str, action: str) -> None:
    require_commander(actor=actor, commanders=_commanders(incident), admins=ctx_services.settings.admin_user_ids,
                      action=action, incident_key=incident.key)


def _ephemeral(client: WebClient, *, channel: str, user: str, text: str) -> None:
    try:
        client.chat_postEphemeral(channel=channel, user=user, text=text)
    except SlackApiError as error:
        log.warning("could not send an ephemeral reply: %s", error.response.get("error"))


def _assign(*, services: Services, area: RecordsArea, client: WebClient, incident: IncidentView, user_id: str,
            role: str, actor: str) -> IncidentView:
    """Assign, announce in the thread, DM the assignee what is expected, hand off when owner/commander moved."""
    role = parse_role(text=role)
    if role == "commander" and _commanders(incident):
        _require_commander(services, incident, actor=actor, action="reassign the commander of")
    updated = services.incidents.assign(incident_key=incident.key, user_id=user_id, role=role, actor=actor)
    _post(client, updated, text=f"<@{actor}> made <@{user_id}> *{role}* of {updated.key}.")
    client.chat_postMessage(channel=user_id, text=role_expectations(role=role, incident_key=updated.key,
                                                                     target=updated.target))
    if role in HANDOFF_ROLES:
        post_handoff(services=services, area=area, client=client, incident_key=updated.key,
                     reason=f"{role} is now <@{user_id}>")
    return updated


# --- subcommands --------------------------------------------------------------------------------------


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


def _subcommands(area: RecordsArea) -> list[Subcommand]:
    base = {item.name: item for item in default_subcommands()}

    def run_job(ctx: CommandContext) -> None:
        base["job"].run(ctx)
        try:
            incident = ctx.services.incidents.open_in_channel(channel_id=ctx.channel_id)
        except IncidentError:
            return
        if not incident.holders("owner") and incident.thread_ts:
            _post(ctx.client, incident, text=f"Who owns {incident.key}? Pick an owner:",
                  blocks_=[blocks.section(f"Who owns *{incident.key}*? Pick an owner; they get a DM saying what "
                                          "is expected."), records_views.assign_owner_block(incident_key=incident.key)])
        schedule_update_reminder(store=area.jobs, thread=thread_of(incident), now=area.clock())
        ensure_weekly_digest(store=area.jobs, channel=incident.channel_id, now=area.clock())

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
        _assign(services=ctx.services, area=area, client=ctx.client, incident=incident, user_id=match.group(1),
                role=words[1], actor=ctx.user_id)

    def run_change(ctx: CommandContext) -> None:
        incident, rest = ctx.incident_and_rest()
        words = rest.split()
        if len(words) == 2 and words[0].lstrip("#").isdigit():
            _change_state(ctx, change_id=int(words[0].lstrip("#")), state=words[1])
            return
        if rest:
            outcome = area.changes.propose(incident_key=incident.key, proposed_by=ctx.user_id,
                                           approved_by="", **parse_change_text(text=rest))  # type: ignore[arg-type]
            _post(ctx.client, incident, text=f"<@{ctx.user_id}> proposed change #{outcome.change.id}: "
                  f"{outcome.change.what}", blocks_=records_views.change_blocks(change=outcome.change,
                                                                                 warning=outcome.warning))
            return
        if not ctx.trigger_id:
            raise UsageError("Slack sent no trigger to open the change form; run `/triage change` again.")
        ctx.client.views_open(trigger_id=ctx.trigger_id, view=records_views.change_modal(
            incident_key=incident.key, channel=incident.channel_id, thread_ts=incident.thread_ts or ""))

    def check_measure(rest: str) -> None:
        words = rest.split()
        if words and INCIDENT_KEY.match(words[0]):
            words = words[1:]
        if len(words) < 3:
            raise UsageError("Type `/triage measure <change#> <window> <value><unit>`, e.g. "
                             "`/triage measure 3 +15m 182GB/s`.")
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
        change = area.changes.measure(change_id=change_id, window=words[1], value=value, unit=unit, actor=ctx.user_id)
        incident = ctx.services.incidents.get(incident_key=change.incident_key)
        _post(ctx.client, incident, text=f"Change #{change.id}: {words[1]} measured {value:g} {unit}",
              blocks_=records_views.change_blocks(change=change))
        _upload_chart(ctx.client, incident, change)

    def run_handoff(ctx: CommandContext) -> None:
        incident, _ = _incident_and_words(ctx)
        post_handoff(services=ctx.services, area=area, client=ctx.client, incident_key=incident.key,
                     reason=f"requested by <@{ctx.user_id}>")

    def run_postmortem(ctx: CommandContext) -> None:
        incident, _ = _incident_and_words(ctx)
        post_postmortem(services=ctx.services, area=area, client=ctx.client, incident_key=incident.key)

    def _change_state(ctx: CommandContext, *, change_id: int, state: str) -> None:
        operations = {"applied": area.changes.apply, "validated": area.changes.validate,
                      "rolled-back": area.changes.roll_back, "rolled_back": area.changes.roll_back,
                      "rollback": area.changes.roll_back}
        operation = operations.get(state.lower())
        if operation is None:
            raise UsageError("Type `/triage change <n> applied|validated|rolled-back`.")
        outcome = operation(change_id=change_id, actor=ctx.user_id)
        after_change_state(area=area, client=ctx.client, incidents=ctx.services.incidents, user=ctx.user_id,
                           outcome=outcome)

    def run_status(ctx: CommandContext) -> None:
        incident, words = _incident_and_words(ctx)
        if words and words[-1].lower() == "resolved":
            _require_commander(ctx.services, incident, actor=ctx.user_id, action="resolve")
        base["status"].run(ctx)
        if words and words[-1].lower() == "resolved":
            _after_resolve(ctx, ctx.services.incidents.get(incident_key=incident.key))

    def _after_resolve(ctx: CommandContext, updated: IncidentView) -> None:
        area.jobs.cancel(kind=JobKind.UPDATE_REMINDER, incident_key=updated.key)
        _post(ctx.client, updated, text=f"{updated.key} is resolved. Write the postmortem?",
              blocks_=[blocks.section(f"*{updated.key}* is resolved. A resolved incident is not complete until "
                                      "root cause, remediation and prevention are in one record."),
                       {"type": "actions", "elements": [blocks.button(text="Write postmortem",
                                                                      action_id=POSTMORTEM_ACTION,
                                                                      value=updated.key, style="primary")]}])

    def run_resolve(ctx: CommandContext) -> None:
        incident, words = _incident_and_words(ctx)
        _require_commander(ctx.services, incident, actor=ctx.user_id, action="resolve")
        if incident.status == "resolved":
            raise UsageError(f"{incident.key} is already resolved.")
        if words:
            ctx.services.incidents.add_note(incident_key=incident.key, text="remediation: " + " ".join(words),
                                            actor=ctx.user_id)
        updated = ctx.services.incidents.set_status(incident_key=incident.key, status="resolved", actor=ctx.user_id)
        _post(ctx.client, updated, text=f"<@{ctx.user_id}> resolved {updated.key}.")
        _after_resolve(ctx, updated)
        ctx.refresh_root(updated)

    def run_reopen(ctx: CommandContext) -> None:
        incident, _ = _incident_from_key_or_latest(ctx)
        _require_commander(ctx.services, incident, actor=ctx.user_id, action="reopen")
        step = reopen(incidents=ctx.services.incidents, incident_key=incident.key, actor=ctx.user_id)
        _post(ctx.client, step.incident, text=f"<@{ctx.user_id}> reopened {step.incident.key}.")
        schedule_update_reminder(store=area.jobs, thread=thread_of(step.incident), now=area.clock())
        ctx.refresh_root(step.incident)

    def check_severity(rest: str) -> None:
        if not rest.split():
            raise UsageError("Type `/triage severity <critical|high|medium|low|info>`.")

    def run_severity(ctx: CommandContext) -> None:
        incident, words = _incident_and_words(ctx)
        _require_commander(ctx.services, incident, actor=ctx.user_id, action="change the severity of")
        step = set_severity(incidents=ctx.services.incidents, incident_key=incident.key, severity=words[-1],
                            actor=ctx.user_id)
        area.jobs.cancel(kind=JobKind.UPDATE_REMINDER, incident_key=incident.key)
        schedule_update_reminder(store=area.jobs, thread=thread_of(step.incident), now=area.clock())
        _post(ctx.client, step.incident, text=f"<@{ctx.user_id}> changed the severity of {incident.key} from "
              f"{step.previous} to *{step.incident.severity}*; update reminders follow the new interval.")
        ctx.refresh_root(step.incident)

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
        action = area.prevention.add(incident_key=incident.key, description=description, owner=owner,
                                     due_on=due_on, guardrail_check=guardrail, actor=ctx.user_id)
        schedule_prevention_followup(store=area.jobs, action_id=action.id, incident_key=incident.key, due_on=due_on)
        ensure_weekly_digest(store=area.jobs, channel=incident.channel_id, now=area.clock())
        _post(ctx.client, incident, text=f":shield: Prevention #{action.id} for <@{owner}>, due {due_on.isoformat()}: "
              f"{description}. Guardrail check: {guardrail}")

    listed = [
        Subcommand(name="job", usage=base["job"].usage, summary=base["job"].summary, run=run_job,
                   check=base["job"].check, working_text=base["job"].working_text),
        Subcommand(name="assign", usage="assign [INC-n] @person <role>",
                   summary="roles: commander, owner, scribe, observer, owner:<layer>; the person gets a DM",
                   run=run_assign, check=check_assign),
        Subcommand(name="status", usage=base["status"].usage, summary=base["status"].summary + " (resolved: commander)",
                   run=run_status, check=base["status"].check),
        Subcommand(name="change", usage="change [INC-n] [<variable> | <what> | <effect> | <metric> | <rollback>]",
                   summary="record a change (form, or one line); `change <n> applied|validated|rolled-back`",
                   run=run_change),
        Subcommand(name="measure", usage="measure [INC-n] <change#> <window> <value><unit>",
                   summary="attach a measurement to a change", run=run_measure, check=check_measure),
        Subcommand(name="handoff", usage="handoff [INC-n]", summary="post the handoff (thread + Markdown file)",
                   run=run_handoff),
        Subcommand(name="postmortem", usage="postmortem [INC-n]", summary="write the postmortem (Markdown file)",
                   run=run_postmortem),
        Subcommand(name="resolve", usage="resolve [INC-n] [remediation]", summary="commander only: resolve",
                   run=run_resolve),
        Subcommand(name="reopen", usage="reopen INC-n", summary="commander only: reopen a resolved incident",
                   run=run_reopen),
        Subcommand(name="severity", usage="severity [INC-n] <critical|high|medium|low|info>",
                   summary="commander only: set severity (and the reminder interval)", run=run_severity,
                   check=check_severity),
        Subcommand(name="prevent", usage="prevent [INC-n] @owner YYYY-MM-DD <action> | <guardrail check>",
                   summary="add a prevention action", run=run_prevent, check=check_prevent),
    ]
    return [dataclasses.replace(item, run=_user_errors(item.run)) for item in listed]


def _incident_from_key_or_latest(ctx: CommandContext) -> tuple[IncidentView, str]:
    first, _, remainder = ctx.rest.strip().partition(" ")
    if INCIDENT_KEY.match(first):
        return ctx.services.incidents.get(incident_key=first.upper()), remainder
    raise UsageError("Type `/triage reopen INC-n`: a resolved incident is no longer the channel's open one.")


def after_change_state(*, area: RecordsArea, client: WebClient, incidents: Any, user: str,
                       outcome: ChangeOutcome) -> None:
    """Announce a change's new state; applied queues validation windows, rolled back cancels them."""
    change = outcome.change
    incident = incidents.get(incident_key=change.incident_key)
    verb = change.state.value.replace("_", " ")
    note = ""
    if change.state is ChangeState.APPLIED and change.applied_at is not None:
        queued = schedule_validation_windows(store=area.jobs, change=change, applied_at=change.applied_at)
        note = f" Re-validation snapshots scheduled ({len(queued)} windows: +15m, +60m)."
    headline = f"<@{user}> marked change #{change.id} *{verb}*.{note}"
    _post(client, incident, text=headline,
          blocks_=records_views.change_blocks(change=change, warning=outcome.warning, headline=headline))
    if change.state is ChangeState.VALIDATED:
        _upload_chart(client, incident, change)
    if change.state is ChangeState.ROLLED_BACK:
        area.jobs.cancel(kind=JobKind.VALIDATION_WINDOW, incident_key=change.incident_key,
                         dedupe_prefix=validation_prefix(change_id=change.id))


def _upload_chart(client: WebClient, incident: IncidentView, change: ChangeView) -> None:
    if len({item.window for item in change.measurements}) < 2:
        return
    client.files_upload_v2(
        channel=incident.channel_id, thread_ts=incident.thread_ts,
        filename=f"{incident.key}-change-{change.id}.png", content=charts.change_chart_png(change=change),
        title=f"Change #{change.id}: {change.metric} per window",
        initial_comment=f"Change #{change.id}: gain {'repeated' if change.gain_repeated else 'did NOT repeat'} "
        f"across {len({item.window for item in change.measurements})} windows.",
    )


# --- interactivity ------------------------------------------------------------------------------------


def register(app: App, services: Services, area: RecordsArea) -> None:
    """Subcommands into the router (before the foundation's defaults) and the interactive listeners."""
    for subcommand in _subcommands(area):
        services.subcommands[subcommand.name] = subcommand

    def guarded(work: Callable[[dict[str, Any], WebClient], None]) -> Callable[[dict[str, Any], WebClient], None]:
        def run(body: dict[str, Any], client: WebClient) -> None:
            user = (body.get("user") or {}).get("id", "")
            channel = (body.get("channel") or {}).get("id", "") or (body.get("container") or {}).get("channel_id", "")
            try:
                work(body, client)
            except (ChangeError, IncidentError, PermissionRefused, UsageError, ValueError) as error:
                _ephemeral(client, channel=channel or user, user=user, text=str(error))
            except Exception:
                log.exception("records action failed")
                _ephemeral(client, channel=channel or user, user=user,
                           text="That action failed; nothing was half-saved. Try again.")
            finally:
                services.work.end()

        return run

    def just_ack(ack: Ack) -> None:
        services.work.begin()  # the lazy worker ends it, so tests and the demo can wait for the work
        ack()

    def on_change_state(body: dict[str, Any], client: WebClient) -> None:
        action = body["actions"][0]
        change_id = int(action["value"])
        user = body["user"]["id"]
        operation = {
            records_views.APPLIED_ACTION: area.changes.apply,
            records_views.VALIDATED_ACTION: area.changes.validate,
            records_views.ROLLED_BACK_ACTION: area.changes.roll_back,
        }[action["action_id"]]
        outcome = operation(change_id=change_id, actor=user)
        message = body.get("message") or {}
        if message.get("ts"):
            incident = services.incidents.get(incident_key=outcome.change.incident_key)
            client.chat_update(channel=incident.channel_id, ts=message["ts"], text=f"Change #{outcome.change.id}",
                               blocks=blocks.validate_blocks(records_views.change_blocks(change=outcome.change)))
        after_change_state(area=area, client=client, incidents=services.incidents, user=user, outcome=outcome)

    def on_assign_owner(body: dict[str, Any], client: WebClient) -> None:
        action = body["actions"][0]
        key = str(action.get("block_id", "")).removeprefix("assign_")
        incident = services.incidents.get(incident_key=key)
        _assign(services=services, area=area, client=client, incident=incident,
                user_id=action["selected_user"], role="owner", actor=body["user"]["id"])

    def on_snooze(body: dict[str, Any], client: WebClient) -> None:
        key = body["actions"][0]["value"]
        incident = services.incidents.get(incident_key=key)
        moved = area.jobs.postpone(kind=JobKind.UPDATE_REMINDER, incident_key=key, until=area.clock() + SNOOZE)
        _post(client, incident, text=f"<@{body['user']['id']}> snoozed update reminders for {key} by 1 hour "
              f"({moved} reminder(s) moved).")

    def on_postmortem(body: dict[str, Any], client: WebClient) -> None:
        post_postmortem(services=services, area=area, client=client, incident_key=body["actions"][0]["value"])

    for action_id in (records_views.APPLIED_ACTION, records_views.VALIDATED_ACTION, records_views.ROLLED_BACK_ACTION):
        app.action(action_id)(ack=just_ack, lazy=[guarded(on_change_state)])
    app.action(records_views.ASSIGN_OWNER_ACTION)(ack=just_ack, lazy=[guarded(on_assign_owner)])
    app.action(SNOOZE_ACTION_ID)(ack=just_ack, lazy=[guarded(on_snooze)])
    app.action(POSTMORTEM_ACTION)(ack=just_ack, lazy=[guarded(on_postmortem)])

    def ack_change_form(ack: Ack, body: dict[str, Any]) -> None:
        _fields, _meta, errors = records_views.read_change_submission(view=body["view"])
        if errors:
            ack(response_action="errors", errors=errors)
            return
        services.work.begin()
        ack()

    def record_change(body: dict[str, Any], client: WebClient) -> None:
        fields, meta, errors = records_views.read_change_submission(view=body["view"])
        if errors:
            return
        user = body["user"]["id"]
        try:
            outcome = area.changes.propose(incident_key=meta["incident"], proposed_by=user, **fields)
            incident = services.incidents.get(incident_key=meta["incident"])
            _post(client, incident, text=f"<@{user}> proposed change #{outcome.change.id}: {outcome.change.what}",
                  blocks_=records_views.change_blocks(change=outcome.change, warning=outcome.warning))
        except (ChangeError, IncidentError) as error:
            _ephemeral(client, channel=meta.get("channel") or user, user=user, text=str(error))
        except Exception:
            log.exception("recording a change failed")
            _ephemeral(client, channel=meta.get("channel") or user, user=user,
                       text="The change could not be recorded; nothing was half-saved. Submit it again.")
        finally:
            services.work.end()

    app.view(records_views.CHANGE_MODAL_CALLBACK)(ack=ack_change_form, lazy=[record_change])

