"""Block Kit builders for incident messages, and a check against Slack's published limits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bot import markup
from bot.evidence.report import SnapshotReport
from bot.incidents.policy import BOT_ACTOR
from bot.incidents.service import IncidentView, TimelineItem
from handlers.slack.blocks import limits as block_limits
from handlers.slack.blocks.limits import (
    MAX_BLOCKS,
    MAX_BUTTON_TEXT,
    MAX_CONTEXT_ELEMENTS,
    MAX_HEADER_TEXT,
    MAX_SECTION_TEXT,
    BlockLimitError,  # noqa: F401 (re-exported: callers catch blocks.BlockLimitError)
)

MAX_FALLBACK_TEXT = 40_000

Block = dict[str, Any]

STATUS_EMOJI = {
    "investigating": ":mag:",
    "identified": ":bulb:",
    "mitigated": ":adhesive_bandage:",
    "monitoring": ":eyes:",
    "resolved": ":white_check_mark:",
}
SEVERITY_EMOJI = {
    "critical": ":red_circle:",
    "high": ":large_orange_circle:",
    "medium": ":large_yellow_circle:",
    "low": ":large_blue_circle:",
    "info": ":white_circle:",
}


def clip(text: str, *, limit: int) -> str:
    """Shorten to `limit` characters, marking the cut (composed Mrkdwn is never cut inside markup)."""
    return markup.clip(text, limit=limit)


def header(text: str) -> Block:
    """A header block (plain text, 150 characters)."""
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": clip(text, limit=MAX_HEADER_TEXT), "emoji": True},
    }


def section(text: str) -> Block:
    """A mrkdwn section (3000 characters)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, limit=MAX_SECTION_TEXT)}}


def context(*texts: str) -> Block:
    """A context line of up to ten mrkdwn elements."""
    return {
        "type": "context",
        "elements": [
            {"type": "mrkdwn", "text": clip(text, limit=MAX_SECTION_TEXT)}
            for text in texts[:MAX_CONTEXT_ELEMENTS]
        ],
    }


def button(*, text: str, action_id: str, value: str = "", style: str | None = None) -> Block:
    """A button element (75-character label)."""
    element: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": clip(text, limit=MAX_BUTTON_TEXT)},
        "action_id": action_id,
        "value": value[:2000],
    }
    if style:
        element["style"] = style
    return element


def who(user_id: str) -> markup.Mrkdwn:
    """A Slack mention, or the bot's own name for what it did itself (alert intake); never `<@triage-bot>`."""
    return markup.Mrkdwn("triage-bot") if user_id == BOT_ACTOR else markup.mention(user_id)


def _alert_line(incident: IncidentView) -> markup.Mrkdwn | None:
    """An alert-opened incident's title (alert, severity, summary, link back), escaped; None otherwise."""
    if incident.opened_by != BOT_ACTOR or incident.title == f"{incident.target} needs triage":
        return None
    return markup.format(":rotating_light: *From Alertmanager:* {}", incident.title)


def _roles_line(incident: IncidentView) -> markup.Mrkdwn:
    if not incident.roles:
        return markup.Mrkdwn("no roles assigned")
    roles = markup.join(", ", (markup.format("{} {}", item.role, who(item.user_id)) for item in incident.roles))
    if incident.holders("commander") == (BOT_ACTOR,):
        roles = roles + markup.Mrkdwn(" (nobody yet: `/triage assign @you commander`)")
    return roles


def incident_root(*, incident: IncidentView, report: SnapshotReport | None = None) -> list[Block]:
    """The root message: what, status, who; findings go in the thread."""
    emoji = STATUS_EMOJI.get(incident.status, "")
    blocks = [
        header(f"{incident.key}: {incident.target}"),
        section(
            markup.format(
                "{} *Status:* {}   *Severity:* {}\n*Workload:* `{}`\n*Roles:* {}",
                emoji,
                incident.status,
                incident.severity or "not yet known",
                incident.target,
                _roles_line(incident),
            )
        ),
    ]
    alert = _alert_line(incident)
    if alert is not None:
        blocks.append(section(alert))
    if report is not None:
        layer = report.verdict.layer.value if report.verdict.layer else "undetermined"
        blocks.append(
            section(
                markup.format(
                    "*Verdict:* {} ({:.0%}) — {}", layer, report.verdict.confidence, report.verdict.summary
                )
            )
        )
    elif incident.verdict_layer:
        blocks.append(section(markup.format("*Failing layer (last snapshot):* {}", incident.verdict_layer)))
    blocks.append(
        context(
            markup.format("Opened by {} at {:%Y-%m-%d %H:%M} UTC", who(incident.opened_by), incident.opened_at),
            "Everything about this incident is in the thread. `/triage help` lists what you can do.",
        )
    )
    return blocks


def incident_root_text(*, incident: IncidentView) -> str:
    """Notification fallback for the root message."""
    return f"{incident.key} {incident.status}: {incident.target}"


def open_list(*, incidents: Sequence[IncidentView]) -> list[Block]:
    """`/triage list`: one line per open incident."""
    if not incidents:
        return [section("No open incidents. :sparkles:")]
    lines = [
        markup.format(
            "*{}* {} {} · `{}` · severity {} · commander {}",
            item.key,
            STATUS_EMOJI.get(item.status, ""),
            item.status,
            item.target,
            item.severity or "?",
            markup.join(", ", (who(user) for user in item.holders("commander"))) or "none",
        )
        for item in incidents
    ]
    blocks = [header(f"{len(incidents)} open incident(s)")]
    chunk: list[markup.Mrkdwn] = []
    for line in lines:
        if sum(len(item) + 1 for item in chunk) + len(line) > MAX_SECTION_TEXT - 10:
            blocks.append(section(markup.join("\n", chunk)))
            chunk = []
        chunk.append(line)
    if chunk:
        blocks.append(section(markup.join("\n", chunk)))
    if len(blocks) > MAX_BLOCKS:
        blocks = blocks[: MAX_BLOCKS - 1] + [section("…more open incidents than fit in one message.")]
    return blocks


def timeline_line(*, incident_key: str, item: TimelineItem) -> markup.Mrkdwn:
    """One thread reply for a timeline event."""
    return markup.format("{} · {:%H:%M} UTC · {}: {}", incident_key, item.at, markup.mention(item.actor), item.text)


def help_blocks(*, usages: Iterable[tuple[str, str]]) -> list[Block]:
    """`/triage help`: every subcommand's usage and one-line summary."""
    lines = [markup.format("`/triage {}` — {}", usage, summary) for usage, summary in usages]
    return [header("/triage subcommands"), section(markup.join("\n", lines))]


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj.get("text", ""))
    return ""


def validate_blocks(blocks: Sequence[Block]) -> list[Block]:
    """Raise BlockLimitError if Slack would reject these blocks; return them unchanged otherwise."""
    return block_limits.checked(blocks)
