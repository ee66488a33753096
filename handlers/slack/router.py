"""`/triage <subcommand>`: parse, ack within Slack's 3 seconds, then do the work and reply.

The router reads the one registry of subcommands (`handlers.slack.commands.registry`), built once per app.
A user never sees a traceback: errors become a short ephemeral message that says what to type instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import time
import unicodedata
import urllib.error
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import markup
from bot.changes.service import ChangeError
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import InvalidTarget
from bot.incidents.errors import IncidentError
from bot.incidents.service import IncidentView
from handlers.ops import logs
from handlers.slack import replies
from handlers.slack.blocks import common as blocks
from handlers.slack.services import Services
from storage import db

log = logging.getLogger(__name__)

COMMAND = "/triage"
INCIDENT_KEY = re.compile(r"(?i)^INC-\d{1,9}$")
USER_MENTION = re.compile(r"^<@([UW][A-Z0-9]{2,30})(?:\|[^>]*)?>$")


class UsageError(ValueError):
    """The command is malformed; the message says what to type instead."""


class SlackFailure(RuntimeError):
    """Slack failed part-way through a command; the message says what was kept and what to do."""


def slack_error_code(error: BaseException) -> str:
    """Slack's error code (`not_in_channel`), or what went wrong on the way (`timeout`)."""
    if isinstance(error, SlackApiError):
        return str(error.response.get("error") or f"HTTP {error.response.status_code}")
    if isinstance(error, TimeoutError):
        return "timeout"
    return type(error).__name__


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
    respond: Callable[..., Any] | None = None
    # Incident keys this command saved or touched, so an error reply can say what is safe.
    touched: list[str] = dataclasses.field(default_factory=list)

    @property
    def args(self) -> list[str]:
        """Whitespace-separated words after the subcommand."""
        return self.rest.split()

    def incident_and_rest(self) -> tuple[IncidentView, str]:
        """An explicit `INC-0042` first word, else the channel's open incident; plus the remaining text."""
        first, _, remainder = self.rest.strip().partition(" ")
        if INCIDENT_KEY.match(first):
            incident, rest = self.here(self.services.incidents.get(incident_key=first.upper())), remainder.strip()
        else:
            incident, rest = self.services.incidents.open_in_channel(channel_id=self.channel_id), self.rest.strip()
        logs.bind_incident(incident.key)
        return incident, rest

    def here(self, incident: IncidentView) -> IncidentView:
        """The incident, if this channel may work on it (the rulebook refuses another channel's)."""
        self.services.core.policy.require_same_channel(
            actor=self.user_id, incident_key=incident.key, incident_channel=incident.channel_id,
            from_channel=self.channel_id,
        )
        return incident

    def reply_ephemeral(self, text: str, *, blocks_: Sequence[blocks.Block] | None = None) -> None:
        """A message only the caller sees (plain `str` is data and shown escaped; compose with `markup`)."""
        replies.post_ephemeral(self.client, channel=self.channel_id, user=self.user_id, text=text, blocks_=blocks_)

    def post_in_thread(
        self, incident: IncidentView, *, text: str, blocks_: Sequence[blocks.Block] | None = None
    ) -> str:
        """A reply in the incident's thread (or the channel, before a root message exists); returns its ts."""
        logs.bind_incident(incident.key)
        if incident.key not in self.touched:
            self.touched.append(incident.key)
        return replies.post(self.client, incident, text=text, blocks_=blocks_)

    def refresh_root(self, incident: IncidentView, *, report: SnapshotReport | None = None) -> None:
        """Re-render the root message after a state change (with the verdict, right after a snapshot)."""
        replies.refresh_root(self.client, incident, report=report)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Subcommand:
    """One `/triage` subcommand: `check` runs before the ack (fast, raises UsageError), `run` after."""

    name: str
    usage: str
    summary: str
    run: Callable[[CommandContext], None]
    check: Callable[[str], None] | None = None
    working_text: str | None = None


# --- routing -----------------------------------------------------------------------------------------


def safe_echo(text: str, *, limit: int = 40) -> str:
    """User input quoted back in mrkdwn: no control or bidi characters, no mentions or links, no
    way out of a `code span`, bounded length."""
    cleaned = "".join("?" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text)
    cleaned = cleaned.replace("`", "'").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return blocks.clip(cleaned, limit=limit)


def defang(message: str) -> str:
    """A refusal the bot wrote, as Slack shows it: control characters dropped, and no `<...>` but the
    bot's own mentions live (`bot.markup`'s guard), so a broadcast or link a user typed stays text."""
    return markup.render(markup.of_error(UsageError(message)))


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
            defang(
                f"`{safe_echo(name, limit=30)}` is not a /triage subcommand. Try one of: {known}. "
                "`/triage help` explains each."
            ),
        )
    if subcommand.check is not None:
        try:
            subcommand.check(rest.strip())
        except (UsageError, IncidentError) as error:
            return None, rest, markup.render(markup.of_error(error))
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

    def ack_triage(ack: Ack, body: dict[str, Any], context: BoltContext) -> None:
        subcommand, _rest, error = route(subcommands=services.subcommands, text=str(body.get("text", "")))
        received = context.get("received_at") or time.monotonic()
        if error is not None:
            ack(text=error)
            services.metrics.count(subcommand=_name_of(body), outcome="rejected")
        else:
            services.work.begin()
            if subcommand is not None and subcommand.working_text:
                ack(text=subcommand.working_text)
            else:
                ack()
        services.metrics.ack_latency.observe(time.monotonic() - received)

    def work_triage(body: dict[str, Any], client: WebClient, respond: Respond) -> None:
        subcommand, rest, error = route(subcommands=services.subcommands, text=str(body.get("text", "")))
        if subcommand is None or error is not None:
            return  # already answered in the ack
        try:
            _execute(
                services=services, subcommand=subcommand, rest=rest, body=body, client=client, respond=respond
            )
        finally:
            services.work.end()

    app.command(COMMAND)(ack=ack_triage, lazy=[work_triage])


def _name_of(body: dict[str, Any]) -> str:
    name = str(body.get("text", "")).strip().partition(" ")[0].lower()
    return name if re.fullmatch(r"[a-z-]{1,20}", name) else "other"


def _execute(
    *,
    services: Services,
    subcommand: Subcommand,
    rest: str,
    body: dict[str, Any],
    client: WebClient,
    respond: Respond | None,
) -> None:
    ctx = CommandContext(
        services=services,
        client=client,
        user_id=str(body.get("user_id", "")),
        channel_id=str(body.get("channel_id", "")),
        name=subcommand.name,
        rest=rest,
        trigger_id=str(body.get("trigger_id", "")),
        respond=respond,
    )
    fingerprint = request_fingerprint(body)
    with logs.bound(subcommand=subcommand.name, slack_user=ctx.user_id, request_id=fingerprint):
        _execute_bound(services=services, subcommand=subcommand, ctx=ctx, fingerprint=fingerprint)


def _execute_bound(
    *, services: Services, subcommand: Subcommand, ctx: CommandContext, fingerprint: str
) -> None:
    outcome = "ok"
    try:
        if not services.incidents.claim_request(fingerprint=fingerprint, kind=f"command:{subcommand.name}"):
            outcome = "duplicate"
            return
        subcommand.run(ctx)
    except (UsageError, IncidentError, InvalidTarget, ChangeError) as error:
        outcome = "user_error"
        _tell(ctx, markup.of_error(error))
    except SlackFailure as error:
        outcome = "slack_error"
        _tell(ctx, markup.of_error(error))
    except db.DatabaseUnavailable:
        outcome = "database_unavailable"
        log.warning("database unavailable during /triage %s", subcommand.name, exc_info=True)
        saved = f"{', '.join(ctx.touched)} is saved as it was" if ctx.touched else "Nothing was changed"
        _tell(
            ctx,
            markup.format(
                "The incident database is unavailable for a moment, so `/triage {}` did not complete. {}; "
                "try again in a minute.",
                subcommand.name,
                saved,
            ),
        )
    except SlackApiError as error:
        outcome = "slack_error"
        code = str(error.response.get("error"))
        log.warning("Slack refused a call during /triage %s: %s", subcommand.name, code)
        _tell(ctx, _slack_failure_text(ctx, code=code))
    except (TimeoutError, ConnectionError, urllib.error.URLError) as error:
        outcome = "slack_unreachable"
        log.warning("Slack did not answer during /triage %s: %r", subcommand.name, error)
        _tell(ctx, _slack_failure_text(ctx, code="no answer in time"))
    except Exception:
        outcome = "error"
        reference = uuid.uuid4().hex[:8]
        log.exception("/triage %s failed (ref %s)", subcommand.name, reference)
        saved = f"{', '.join(ctx.touched)} is saved" if ctx.touched else "nothing was half-saved"
        _tell(
            ctx,
            markup.format(
                "`/triage {}` failed; {}. Operators can find ref `{}` in the logs.", subcommand.name, saved, reference
            ),
        )
    finally:
        services.metrics.count(subcommand=subcommand.name, outcome=outcome)
        log.info("/triage %s handled: %s", subcommand.name, outcome, extra={"outcome": outcome})


# Slack errors that mean "the bot is not in this conversation": the fix is an invite, not a retry.
NOT_IN_CHANNEL_ERRORS = frozenset({"not_in_channel", "channel_not_found", "is_archived", "restricted_action"})


def _slack_failure_text(ctx: CommandContext, *, code: str) -> markup.Mrkdwn:
    """What to tell the caller when a Slack call failed: what is saved, and what to do next."""
    saved = f"{', '.join(ctx.touched)} is saved" if ctx.touched else "What was saved stays saved"
    if code in NOT_IN_CHANNEL_ERRORS:
        return markup.format(
            "I can't post in this channel ({}). Invite me with `/invite @triage-bot` (or run the "
            "command in a channel I'm in), then run `/triage {}` again. {}.",
            code,
            ctx.name,
            saved,
        )
    return markup.format(
        "Slack refused part of `/triage {}` ({}). {}; run the command again to retry.", ctx.name, code, saved
    )


def _tell(ctx: CommandContext, text: markup.Mrkdwn) -> None:
    """Ephemeral reply; where the bot cannot post (a DM, a private channel it is not in), the
    command's response_url still reaches the caller."""
    try:
        ctx.reply_ephemeral(text)
        return
    except SlackApiError as error:
        log.warning("could not send an ephemeral reply: %s", error.response.get("error"))
    except Exception as error:  # noqa: BLE001 (Slack unreachable: fall back to response_url)
        log.warning("could not send an ephemeral reply: %r", error)
    if ctx.respond is None:
        return
    try:
        ctx.respond(text=replies.slack_text(text), response_type="ephemeral", replace_original=False)
    except Exception:
        log.warning("response_url reply failed too", exc_info=True)
