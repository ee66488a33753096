"""`/triage <subcommand>`: parse, ack within Slack's 3 seconds, then do the work and reply.

The router is a dict of subcommand name -> Subcommand that other areas extend (change, handoff,
postmortem, resolve, compare, fabric...). A user never sees a traceback: errors become a short
ephemeral message that says what to type instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import incidents as lifecycle
from bot.incidents import IncidentError, IncidentView
from bot.targets import ACCEPTED_FORMS, InvalidTarget, parse_target
from handlers import blocks
from handlers.services import Services

log = logging.getLogger(__name__)

COMMAND = "/triage"
INCIDENT_KEY = re.compile(r"(?i)^INC-\d{1,9}$")
USER_MENTION = re.compile(r"^<@([UW][A-Z0-9]{2,30})(?:\|[^>]*)?>$")


class UsageError(ValueError):
    """The command is malformed; the message says what to type instead."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommandContext:
    """One `/triage` invocation, with helpers to find its incident and reply."""

    services: Services
    client: WebClient
    user_id: str
    channel_id: str
    name: str
    rest: str
    trigger_id: str = ""

    @property
    def args(self) -> list[str]:
        """Whitespace-separated words after the subcommand."""
        return self.rest.split()

    def incident_and_rest(self) -> tuple[IncidentView, str]:
        """An explicit `INC-0042` first word, else the channel's open incident; plus the remaining text."""
        first, _, remainder = self.rest.strip().partition(" ")
        if INCIDENT_KEY.match(first):
            return self.services.incidents.get(incident_key=first.upper()), remainder.strip()
        return self.services.incidents.open_in_channel(channel_id=self.channel_id), self.rest.strip()

    def reply_ephemeral(self, text: str, *, blocks_: Sequence[blocks.Block] | None = None) -> None:
        """A message only the caller sees."""
        kwargs: dict[str, Any] = {"channel": self.channel_id, "user": self.user_id, "text": text}
        if blocks_:
            kwargs["blocks"] = blocks.validate_blocks(blocks_)
        self.client.chat_postEphemeral(**kwargs)

    def post_in_thread(
        self, incident: IncidentView, *, text: str, blocks_: Sequence[blocks.Block] | None = None
    ) -> str:
        """A reply in the incident's thread (or the channel, before a root message exists); returns its ts."""
        kwargs: dict[str, Any] = {"channel": incident.channel_id, "text": text}
        if incident.thread_ts:
            kwargs["thread_ts"] = incident.thread_ts
        if blocks_:
            kwargs["blocks"] = blocks.validate_blocks(blocks_)
        return str(self.client.chat_postMessage(**kwargs)["ts"])

    def refresh_root(self, incident: IncidentView) -> None:
        """Re-render the root message after a state change."""
        if not incident.thread_ts:
            return
        self.client.chat_update(
            channel=incident.channel_id,
            ts=incident.thread_ts,
            text=blocks.incident_root_text(incident=incident),
            blocks=blocks.validate_blocks(blocks.incident_root(incident=incident)),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Subcommand:
    """One `/triage` subcommand: `check` runs before the ack (fast, raises UsageError), `run` after."""

    name: str
    usage: str
    summary: str
    run: Callable[[CommandContext], None]
    check: Callable[[str], None] | None = None
    working_text: str | None = None


# --- the foundation's subcommands -------------------------------------------------------------------


def _check_job(rest: str) -> None:
    try:
        parse_target(rest)
    except InvalidTarget as error:
        raise UsageError(f"{error} Type `/triage job <id>`.") from None


def _run_job(ctx: CommandContext) -> None:
    services = ctx.services
    target = parse_target(ctx.rest)
    result = services.incidents.open_for_target(
        target=target, channel_id=ctx.channel_id, opened_by=ctx.user_id
    )
    incident = result.incident
    if not result.created and incident.thread_ts:
        where = _permalink(ctx.client, incident) or f"the thread in <#{incident.channel_id}>"
        ctx.reply_ephemeral(
            f"{incident.key} is already open for `{incident.target}` (status {incident.status}): {where}. "
            f"Work in its thread, or `/triage status {incident.key} <status>`."
        )
        return
    # New incident, or one whose root message never reached Slack: post the root now.
    root = ctx.client.chat_postMessage(
        channel=ctx.channel_id,
        text=blocks.incident_root_text(incident=incident),
        blocks=blocks.validate_blocks(blocks.incident_root(incident=incident)),
    )
    incident = services.incidents.attach_root_message(
        incident_key=incident.key, channel_id=str(root["channel"]), ts=str(root["ts"])
    )
    ctx.post_in_thread(
        incident,
        text=f"{incident.key} opened by <@{ctx.user_id}>, who is commander until reassigned "
        f"(`/triage assign @someone commander`). Taking a bounded snapshot of `{incident.target}`…",
    )
    if services.diagnoser is None:
        ctx.post_in_thread(incident, text="No cluster is configured, so no snapshot was taken.")
        return
    try:
        report = services.incidents.run_snapshot(incident_key=incident.key, settings=services.settings)
    except Exception as error:
        log.exception("snapshot failed for %s", incident.key)
        services.incidents.add_timeline_entry(
            incident_key=incident.key,
            actor=lifecycle.BOT_ACTOR,
            kind="snapshot_failed",
            text=f"Snapshot failed: {type(error).__name__}",
        )
        ctx.post_in_thread(
            incident,
            text=f"The snapshot failed ({type(error).__name__}); the incident stays open. "
            "Check the bot's logs and cluster access.",
        )
        return
    ctx.post_in_thread(
        incident,
        text=blocks.snapshot_text(incident_key=incident.key, report=report),
        blocks_=blocks.snapshot_findings(
            incident_key=incident.key, report=report, label=services.diagnoser_label
        ),
    )
    incident = services.incidents.get(incident_key=incident.key)
    ctx.client.chat_update(
        channel=incident.channel_id,
        ts=incident.thread_ts,
        text=blocks.incident_root_text(incident=incident),
        blocks=blocks.validate_blocks(blocks.incident_root(incident=incident, report=report)),
    )


def _permalink(client: WebClient, incident: IncidentView) -> str | None:
    try:
        return str(
            client.chat_getPermalink(channel=incident.channel_id, message_ts=incident.thread_ts)["permalink"]
        )
    except SlackApiError:
        return None


def _check_status(rest: str) -> None:
    words = rest.split()
    if not words or words[-1].lower() not in lifecycle.STATUSES:
        raise UsageError(
            f"Type `/triage status <{'|'.join(lifecycle.STATUSES)}>` (optionally after an INC- key)."
        )


def _run_status(ctx: CommandContext) -> None:
    incident, rest = ctx.incident_and_rest()
    updated = ctx.services.incidents.set_status(incident_key=incident.key, status=rest, actor=ctx.user_id)
    ctx.post_in_thread(
        updated, text=f"<@{ctx.user_id}> set {updated.key} to *{updated.status}* (was {incident.status})."
    )
    ctx.refresh_root(updated)


def _parse_assign(rest: str) -> tuple[str | None, str, str]:
    words = rest.split()
    key = words.pop(0).upper() if words and INCIDENT_KEY.match(words[0]) else None
    if len(words) != 2:
        raise UsageError("Type `/triage assign @person <commander|owner|scribe|observer|owner:<layer>>`.")
    mention, role = words
    match = USER_MENTION.match(mention)
    if match is None:
        raise UsageError(
            f"Couldn't tell who `{mention[:40]}` is: pick the person from Slack's @ autocomplete, "
            "e.g. `/triage assign @alex owner`."
        )
    return key, match.group(1), role


def _check_assign(rest: str) -> None:
    _key, _user, role = _parse_assign(rest)
    try:
        lifecycle.normalise_role(role)
    except IncidentError as error:
        raise UsageError(str(error)) from None


def _run_assign(ctx: CommandContext) -> None:
    key, user_id, role = _parse_assign(ctx.rest)
    incident = (
        ctx.services.incidents.get(incident_key=key)
        if key
        else ctx.services.incidents.open_in_channel(channel_id=ctx.channel_id)
    )
    updated = ctx.services.incidents.assign(
        incident_key=incident.key, user_id=user_id, role=role, actor=ctx.user_id
    )
    ctx.post_in_thread(
        updated,
        text=f"<@{ctx.user_id}> made <@{user_id}> *{lifecycle.normalise_role(role)}* of {updated.key}.",
    )
    ctx.refresh_root(updated)


def _check_note(rest: str) -> None:
    words = rest.split()
    if not words or (len(words) == 1 and INCIDENT_KEY.match(words[0])):
        raise UsageError("Type `/triage note <what you saw or did>`.")


def _run_note(ctx: CommandContext) -> None:
    incident, text = ctx.incident_and_rest()
    item = ctx.services.incidents.add_note(incident_key=incident.key, text=text, actor=ctx.user_id)
    ctx.post_in_thread(incident, text=f":memo: <@{ctx.user_id}> noted: {blocks.clip(item.text, limit=3500)}")


def _run_list(ctx: CommandContext) -> None:
    open_incidents = ctx.services.incidents.list_open()
    ctx.reply_ephemeral(
        f"{len(open_incidents)} open incident(s)", blocks_=blocks.open_list(incidents=open_incidents)
    )


def _run_help(ctx: CommandContext) -> None:
    ctx.reply_ephemeral("triage-bot commands", blocks_=help_blocks(ctx.services))


def help_blocks(services: Services) -> list[blocks.Block]:
    """Usage lines for every registered subcommand."""
    return blocks.help_blocks(usages=[(item.usage, item.summary) for item in services.subcommands.values()])


def default_subcommands() -> list[Subcommand]:
    """The foundation's subcommands."""
    return [
        Subcommand(
            name="job",
            usage="job <id>",
            summary=f"open an incident and take a snapshot; id: {ACCEPTED_FORMS}",
            run=_run_job,
            check=_check_job,
            working_text=":hourglass_flowing_sand: Opening an incident and taking a bounded snapshot…",
        ),
        Subcommand(
            name="status",
            usage=f"status [INC-n] <{'|'.join(lifecycle.STATUSES)}>",
            summary="move the incident along",
            run=_run_status,
            check=_check_status,
        ),
        Subcommand(
            name="assign",
            usage="assign [INC-n] @person <role>",
            summary="roles: commander, owner, scribe, observer, owner:<layer>",
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
        Subcommand(name="list", usage="list", summary="open incidents", run=_run_list),
        Subcommand(name="help", usage="help", summary="this list", run=_run_help),
    ]


# --- routing -----------------------------------------------------------------------------------------


def route(*, subcommands: dict[str, Subcommand], text: str) -> tuple[Subcommand | None, str, str | None]:
    """(subcommand, rest, error): exactly one of subcommand and error is set."""
    name, _, rest = text.strip().partition(" ")
    name = name.lower() or "help"
    subcommand = subcommands.get(name)
    if subcommand is None:
        known = ", ".join(sorted(subcommands))
        return (
            None,
            rest,
            f"`{blocks.clip(name, limit=30)}` is not a /triage subcommand. Try one of: {known}. `/triage help` explains each.",
        )
    if subcommand.check is not None:
        try:
            subcommand.check(rest.strip())
        except UsageError as error:
            return None, rest, str(error)
    return subcommand, rest.strip(), None


def request_fingerprint(body: dict[str, Any]) -> str:
    """Same for a Slack retry or a second replica of one invocation; different for a new one."""
    trigger = body.get("trigger_id")
    if trigger:
        return f"cmd:{trigger}"
    parts = "|".join(
        str(body.get(name, ""))
        for name in ("team_id", "channel_id", "user_id", "command", "text", "response_url")
    )
    return "cmd:" + hashlib.sha256(parts.encode()).hexdigest()


def register(app: App, services: Services) -> None:
    """Attach `/triage` with an ack that answers in milliseconds and a lazy worker."""
    for subcommand in default_subcommands():
        services.subcommands.setdefault(subcommand.name, subcommand)

    def ack_triage(ack: Ack, body: dict[str, Any], context: BoltContext) -> None:
        subcommand, _rest, error = route(subcommands=services.subcommands, text=str(body.get("text", "")))
        received = context.get("received_at") or time.monotonic()
        if error is not None:
            ack(text=error)
            services.metrics.count(subcommand=_name_of(body), outcome="rejected")
        else:
            services.work.begin()
            ack(text=subcommand.working_text) if subcommand and subcommand.working_text else ack()
        services.metrics.ack_latency.observe(time.monotonic() - received)

    def work_triage(body: dict[str, Any], client: WebClient) -> None:
        subcommand, rest, error = route(subcommands=services.subcommands, text=str(body.get("text", "")))
        if subcommand is None or error is not None:
            return  # already answered in the ack
        try:
            _execute(services=services, subcommand=subcommand, rest=rest, body=body, client=client)
        finally:
            services.work.end()

    app.command(COMMAND)(ack=ack_triage, lazy=[work_triage])


def _name_of(body: dict[str, Any]) -> str:
    name = str(body.get("text", "")).strip().partition(" ")[0].lower()
    return name if re.fullmatch(r"[a-z-]{1,20}", name) else "other"


def _execute(
    *, services: Services, subcommand: Subcommand, rest: str, body: dict[str, Any], client: WebClient
) -> None:
    ctx = CommandContext(
        services=services,
        client=client,
        user_id=str(body.get("user_id", "")),
        channel_id=str(body.get("channel_id", "")),
        name=subcommand.name,
        rest=rest,
        trigger_id=str(body.get("trigger_id", "")),
    )
    if not services.incidents.claim_request(
        fingerprint=request_fingerprint(body), kind=f"command:{subcommand.name}"
    ):
        services.metrics.count(subcommand=subcommand.name, outcome="duplicate")
        return
    outcome = "ok"
    try:
        subcommand.run(ctx)
    except (UsageError, IncidentError, InvalidTarget) as error:
        outcome = "user_error"
        _tell(ctx, str(error))
    except SlackApiError as error:
        outcome = "slack_error"
        log.warning(
            "Slack refused a call during /triage %s: %s", subcommand.name, error.response.get("error")
        )
        _tell(
            ctx,
            f"Slack refused part of `/triage {subcommand.name}` ({error.response.get('error')}). "
            "What was saved stays saved; run the command again to retry.",
        )
    except Exception:
        outcome = "error"
        reference = uuid.uuid4().hex[:8]
        log.exception("/triage %s failed (ref %s)", subcommand.name, reference)
        _tell(
            ctx,
            f"`/triage {subcommand.name}` failed; nothing was half-saved. Operators can find ref `{reference}` in the logs.",
        )
    finally:
        services.metrics.count(subcommand=subcommand.name, outcome=outcome)


def _tell(ctx: CommandContext, text: str) -> None:
    try:
        ctx.reply_ephemeral(text)
    except SlackApiError as error:
        log.warning("could not send an ephemeral reply: %s", error.response.get("error"))
