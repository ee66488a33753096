"""`/triage` subcommands of the incident itself: job, status, assign, note, snapshot, list, help."""

from __future__ import annotations

import logging
from datetime import timedelta

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot import markup
from bot.evidence.node_targets import NODE_FORMS, NodeTarget, parse_node_target
from bot.evidence.report import SnapshotUnavailable
from bot.evidence.targets import ACCEPTED_FORMS, InvalidTarget, Target, parse_target
from bot.incidents import service as lifecycle
from bot.incidents.policy import BOT_ACTOR, PermissionRefused, parse_role
from bot.incidents.service import IncidentView
from bot.records.sources import thread_of
from bot.schedule.tasks import TaskKind, ensure_update_reminder, ensure_weekly_digest
from handlers.ops import logs
from handlers.slack import replies
from handlers.slack.blocks import changes as change_blocks
from handlers.slack.blocks import common as blocks
from handlers.slack.commands import compare
from handlers.slack.router import (
    INCIDENT_KEY,
    NOT_IN_CHANNEL_ERRORS,
    USER_MENTION,
    CommandContext,
    SlackFailure,
    Subcommand,
    UsageError,
    safe_echo,
    slack_error_code,
)
from handlers.slack.services import Services

log = logging.getLogger(__name__)

ROOT_POST_FAILED = "root_post_failed"
OPENING_GRACE = timedelta(seconds=60)
COMPARE_WORD = "compare"
POSTMORTEM_ACTION = "triage_write_postmortem"


# --- job -------------------------------------------------------------------------------------------


def _parse_job(rest: str) -> tuple[Target, Target | None]:
    """`<id>` or `<id> compare <healthy-id>`: the workload, and the healthy sibling when asked for."""
    words = rest.split()
    if any(word.lower() == COMPARE_WORD for word in words):
        if len(words) != 3 or words[1].lower() != COMPARE_WORD:
            raise UsageError(f"Type `/triage job <id> compare <healthy-id>`; ids are one of: {ACCEPTED_FORMS}.")
        return _target(words[0]), compare.healthy_target(words[2])
    return _target(rest), None


def _target(raw: str) -> Target:
    try:
        return parse_target(raw)
    except InvalidTarget as error:
        raise UsageError(f"{error} Type `/triage job <id>`.") from None


def _check_job(rest: str) -> None:
    _parse_job(rest)


def _run_job(ctx: CommandContext) -> None:
    target, healthy = _parse_job(ctx.rest)
    incident = _open_and_snapshot(ctx, target=target)
    if incident is None:
        return
    _start_reminders(ctx, incident)
    if healthy is not None:
        compare.compare_and_post(ctx, incident=ctx.services.incidents.get(incident_key=incident.key), healthy=healthy)


def _open_and_snapshot(ctx: CommandContext, *, target: Target) -> IncidentView | None:
    """Open (or find) the workload's incident; post its root and first snapshot when new. None when the
    caller was only pointed at the incident already open."""
    services = ctx.services
    result = services.incidents.open_for_target(target=target, channel_id=ctx.channel_id, opened_by=ctx.user_id)
    incident = result.incident
    ctx.touched.append(incident.key)
    logs.bind_incident(incident.key)
    if not result.created and incident.thread_ts:
        link = _permalink(ctx.client, incident)
        where = markup.escape(link) if link else markup.format("the thread in {}", markup.channel(incident.channel_id))
        ctx.reply_ephemeral(
            markup.format(
                "{} is already open for `{}` (status {}): {}. Work in its thread, or `/triage status {} <status>`.",
                incident.key,
                incident.target,
                incident.status,
                where,
                incident.key,
            )
        )
        return incident
    if not result.created and _being_opened(services, incident):
        ctx.reply_ephemeral(
            markup.format(
                "{} for `{}` is being opened right now; its message appears in a moment.", incident.key, incident.target
            )
        )
        return None
    try:
        return _post_root_and_snapshot(ctx, incident)
    except (SlackClientError, OSError) as error:
        raise SlackFailure(_slack_trouble(ctx, incident_key=incident.key, error=error)) from error


def _post_root_and_snapshot(ctx: CommandContext, incident: IncidentView) -> IncidentView:
    """A new incident, or one whose root message never reached Slack: post the root, then snapshot."""
    services = ctx.services
    try:
        channel, ts = replies.post_root(
            ctx.client,
            channel=ctx.channel_id,
            text=blocks.incident_root_text(incident=incident),
            blocks_=blocks.incident_root(incident=incident),
        )
    except (SlackClientError, OSError) as error:
        services.incidents.add_timeline_entry(
            incident_key=incident.key,
            actor=BOT_ACTOR,
            kind=ROOT_POST_FAILED,
            text=f"Slack did not take the root message: {slack_error_code(error)}",
        )
        raise
    incident = services.incidents.attach_root_message(incident_key=incident.key, channel_id=channel, ts=ts)
    ctx.post_in_thread(
        incident,
        text=markup.format(
            "{} opened by {}, who is commander until reassigned (`/triage assign @someone commander`). "
            "Taking a bounded snapshot of `{}`…",
            incident.key,
            markup.mention(ctx.user_id),
            incident.target,
        ),
    )
    snapshot_and_post(ctx, incident)
    return incident


def _start_reminders(ctx: CommandContext, incident: IncidentView) -> None:
    """Update reminders by severity and the weekly digest; ask for an owner the first time."""
    core = ctx.services.core
    incident = core.incidents.get(incident_key=incident.key)
    if not incident.is_open:
        return
    first_time = ensure_update_reminder(store=core.tasks, thread=thread_of(incident), now=core.clock())
    ensure_weekly_digest(store=core.tasks, channel=incident.channel_id, now=core.clock())
    if first_time is not None and not incident.holders("owner") and incident.thread_ts:
        ctx.post_in_thread(
            incident,
            text=f"Who owns {incident.key}? Pick an owner:",
            blocks_=[
                blocks.section(
                    markup.format("Who owns *{}*? Pick an owner; they get a DM saying what is expected.", incident.key)
                ),
                change_blocks.assign_owner_block(incident_key=incident.key),
            ],
        )


def snapshot_and_post(ctx: CommandContext, incident: IncidentView) -> None:
    """Take one bounded snapshot and post its findings; a refusal or failure is recorded and explained,
    never raised."""
    services = ctx.services
    if services.diagnoser is None:
        ctx.post_in_thread(incident, text="No cluster is configured, so no snapshot was taken.")
        return
    try:
        report = services.incidents.run_snapshot(
            incident_key=incident.key, settings=services.settings, actor=ctx.user_id
        )
    except PermissionRefused as refused:
        ctx.post_in_thread(incident, text=markup.format("No snapshot was taken: {}", markup.of_error(refused)))
        return
    except SnapshotUnavailable as error:
        services.incidents.add_timeline_entry(
            incident_key=incident.key, actor=BOT_ACTOR, kind="snapshot_failed", text=f"No snapshot: {error}"
        )
        ctx.post_in_thread(
            incident,
            text=markup.format(
                "No snapshot was taken: {}. The incident stays open; once access is fixed, "
                "`/triage snapshot {}` takes it again.",
                str(error),
                incident.key,
            ),
        )
        return
    except Exception as error:
        log.exception("snapshot failed for %s", incident.key)
        services.incidents.add_timeline_entry(
            incident_key=incident.key,
            actor=BOT_ACTOR,
            kind="snapshot_failed",
            text=f"Snapshot failed: {type(error).__name__}",
        )
        ctx.post_in_thread(
            incident,
            text=f"The snapshot failed ({type(error).__name__}); the incident stays open. "
            "Check the bot's logs and cluster access.",
        )
        return
    replies.post_findings(ctx.client, incident=incident, report=report)
    ctx.refresh_root(services.incidents.get(incident_key=incident.key), report=report)


def _slack_trouble(ctx: CommandContext, *, incident_key: str, error: Exception) -> str:
    """What to tell the caller when Slack failed part-way through `/triage job`; the record is safe."""
    code = slack_error_code(error)
    incident = ctx.services.incidents.get(incident_key=incident_key)
    rerun = f"`/triage job {incident.target}`"
    if incident.thread_ts is None and code in NOT_IN_CHANNEL_ERRORS:
        return (
            f"{incident.key} is open for `{incident.target}`, but I can't post in this channel ({code}). "
            f"Invite me with `/invite @triage-bot`, then run {rerun} again to post it."
        )
    if incident.thread_ts is None:
        return (
            f"{incident.key} is open for `{incident.target}`, but Slack did not take its message ({code}). "
            f"Nothing is lost: run {rerun} again to post it."
        )
    return (
        f"{incident.key} is open and its snapshot is stored, but Slack did not take a thread reply ({code}). "
        f"`/triage list` shows it; run {rerun} again for a link to its thread."
    )


def _being_opened(services: Services, incident: IncidentView) -> bool:
    """Another request (or replica) opened it moments ago and is posting its root message now."""
    if incident.thread_ts or services.incidents.timeline(incident.key)[-1].kind == ROOT_POST_FAILED:
        return False
    return services.incidents.clock() - incident.opened_at < OPENING_GRACE


def _permalink(client: WebClient, incident: IncidentView) -> str | None:
    if not incident.thread_ts:
        return None
    try:
        return str(
            client.chat_getPermalink(channel=incident.channel_id, message_ts=incident.thread_ts)["permalink"]
        )
    except SlackApiError:
        return None


# --- node ----------------------------------------------------------------------------------------


def _node_target(rest: str) -> NodeTarget:
    words = rest.split()
    if len(words) != 1:
        raise UsageError(f"Type `/triage node <name>`: {NODE_FORMS}.")
    try:
        return parse_node_target(words[0])
    except InvalidTarget as error:
        raise UsageError(f"{error} Type `/triage node <name>`.") from None


def _check_node(rest: str) -> None:
    _node_target(rest)


def _run_node(ctx: CommandContext) -> None:
    """Open (or find) the node's incident and snapshot it, exactly as `job` does for a workload."""
    incident = _open_and_snapshot(ctx, target=_node_target(ctx.rest))
    if incident is not None:
        _start_reminders(ctx, incident)


def start_reminders(ctx: CommandContext, incident: IncidentView) -> None:
    """Update reminders and the owner prompt, for incidents opened elsewhere (alert intake)."""
    _start_reminders(ctx, incident)


# --- status, resolve -------------------------------------------------------------------------------


def _check_status(rest: str) -> None:
    words = rest.split()
    if not words or words[-1].lower() not in lifecycle.STATUSES:
        raise UsageError(f"Type `/triage status <{'|'.join(lifecycle.STATUSES)}>` (optionally after an INC- key).")


def _run_status(ctx: CommandContext) -> None:
    incident, rest = ctx.incident_and_rest()
    updated = ctx.services.incidents.set_status(incident_key=incident.key, status=rest, actor=ctx.user_id)
    ctx.post_in_thread(
        updated,
        text=markup.format(
            "{} set {} to *{}* (was {}).", markup.mention(ctx.user_id), updated.key, updated.status, incident.status
        ),
    )
    if updated.status == "resolved":
        after_resolve(ctx, updated)
    ctx.refresh_root(updated)


def after_resolve(ctx: CommandContext, updated: IncidentView) -> None:
    """Stop update reminders and offer the postmortem."""
    ctx.services.core.tasks.cancel(kind=TaskKind.UPDATE_REMINDER, incident_key=updated.key)
    ctx.post_in_thread(
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
                        text="Write postmortem", action_id=POSTMORTEM_ACTION, value=updated.key, style="primary"
                    )
                ],
            },
        ],
    )


# --- assign ----------------------------------------------------------------------------------------


def _parse_assign(rest: str) -> tuple[str | None, str, str]:
    words = rest.split()
    key = words.pop(0).upper() if words and INCIDENT_KEY.match(words[0]) else None
    if len(words) != 2:
        raise UsageError("Type `/triage assign @person <commander|owner|scribe|observer|owner:<layer>>`.")
    mention, role = words
    match = USER_MENTION.match(mention)
    if match is None:
        raise UsageError(
            f"Couldn't tell who `{safe_echo(mention)}` is: pick the person from Slack's @ autocomplete, "
            "e.g. `/triage assign @alex owner`."
        )
    return key, match.group(1), role


def _check_assign(rest: str) -> None:
    _key, _user, role = _parse_assign(rest)
    parse_role(text=role)


def _run_assign(ctx: CommandContext) -> None:
    key, user_id, role = _parse_assign(ctx.rest)
    incident = (
        ctx.here(ctx.services.incidents.get(incident_key=key))
        if key
        else ctx.services.incidents.open_in_channel(channel_id=ctx.channel_id)
    )
    ctx.touched.append(incident.key)
    replies.assign(core=ctx.services.core, client=ctx.client, incident=incident, user_id=user_id, role=role,
                   actor=ctx.user_id)


# --- note, snapshot, list, help --------------------------------------------------------------------


def _check_note(rest: str) -> None:
    words = rest.split()
    if not words or (len(words) == 1 and INCIDENT_KEY.match(words[0])):
        raise UsageError("Type `/triage note <what you saw or did>`.")


def _run_note(ctx: CommandContext) -> None:
    incident, text = ctx.incident_and_rest()
    item = ctx.services.incidents.add_note(incident_key=incident.key, text=text, actor=ctx.user_id)
    ctx.post_in_thread(
        incident,
        text=markup.format(":memo: {} noted: {}", markup.mention(ctx.user_id), blocks.clip(item.text, limit=3500)),
    )


def _run_snapshot(ctx: CommandContext) -> None:
    incident, rest = ctx.incident_and_rest()
    if rest.strip():
        raise UsageError("Type `/triage snapshot` (or `/triage snapshot INC-n`); it takes nothing else.")
    ctx.post_in_thread(
        incident,
        text=markup.format("{} asked for a fresh snapshot of `{}`…", markup.mention(ctx.user_id), incident.target),
    )
    snapshot_and_post(ctx, incident)


def _run_list(ctx: CommandContext) -> None:
    policy = ctx.services.core.policy
    open_incidents = [
        item
        for item in ctx.services.incidents.list_open()
        if policy.may_see(actor=ctx.user_id, incident_channel=item.channel_id, from_channel=ctx.channel_id)
    ]
    ctx.reply_ephemeral(f"{len(open_incidents)} open incident(s)", blocks_=blocks.open_list(incidents=open_incidents))


def _run_help(ctx: CommandContext) -> None:
    ctx.reply_ephemeral("triage-bot commands", blocks_=help_blocks(ctx.services))


def help_blocks(services: Services) -> list[blocks.Block]:
    """Usage lines for every subcommand in the registry."""
    return blocks.help_blocks(usages=[(item.usage, item.summary) for item in services.subcommands.values()])


SUBCOMMANDS = (
    Subcommand(
        name="job",
        usage=f"job <id> [{COMPARE_WORD} <healthy-id>]",
        summary=f"open an incident and take a snapshot; with `{COMPARE_WORD}`, also diff against a healthy "
        f"workload; id: {ACCEPTED_FORMS}",
        run=_run_job,
        check=_check_job,
        working_text=":hourglass_flowing_sand: Opening an incident and taking a bounded snapshot…",
    ),
    Subcommand(
        name="node",
        usage="node <name>",
        summary=f"is this node bad? open an incident for the node and take a snapshot: conditions, taints, GPUs, "
        f"Xid/ECC/NVLink, GPU operator pods, what runs on it, next steps; name: {NODE_FORMS}",
        run=_run_node,
        check=_check_node,
        working_text=":hourglass_flowing_sand: Opening an incident for the node and taking a bounded snapshot…",
    ),
    Subcommand(
        name="status",
        usage=f"status [INC-n] <{'|'.join(lifecycle.STATUSES)}>",
        summary="commander: move the incident along",
        run=_run_status,
        check=_check_status,
    ),
    Subcommand(
        name="assign",
        usage="assign [INC-n] @person <role>",
        summary="roles: commander, owner, scribe, observer, owner:<layer>; the person gets a DM",
        run=_run_assign,
        check=_check_assign,
    ),
    Subcommand(
        name="note",
        usage="note [INC-n] <text>",
        summary="add a note to the timeline",
        run=_run_note,
        check=_check_note,
    ),
    Subcommand(
        name="snapshot",
        usage="snapshot [INC-n]",
        summary="take a fresh bounded snapshot of the incident's workload",
        run=_run_snapshot,
        working_text=":hourglass_flowing_sand: Taking a bounded snapshot…",
    ),
    Subcommand(name="list", usage="list", summary="open incidents", run=_run_list),
    Subcommand(name="help", usage="help", summary="this list", run=_run_help),
)
