"""Block Kit builders for incident messages, and a check against Slack's published limits."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from bot.incidents import IncidentView, TimelineItem
from bot.report import SnapshotReport

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_BUTTON_TEXT = 75
MAX_CONTEXT_ELEMENTS = 10
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


class BlockLimitError(ValueError):
    """The blocks break one of Slack's limits; Slack would reject the message with invalid_blocks."""


_BROADCAST = re.compile(r"<!(channel|here|everyone)(?:\|[^>]*)?>|<!subteam\^[A-Z0-9]+(?:\|([^>]*))?>")


def quiet(text: str) -> str:
    """User text echoed by the bot must not ping: @channel/@here/@everyone and user groups become plain words."""

    def plain(match: re.Match[str]) -> str:
        name = match.group(1) or (match.group(2) or "group").lstrip("@")
        return "@\u200b" + name  # a zero-width space keeps it from being read as a mention

    return _BROADCAST.sub(plain, text)


def clip(text: str, *, limit: int) -> str:
    """Shorten to `limit` characters, marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _roles_line(incident: IncidentView) -> str:
    if not incident.roles:
        return "no roles assigned"
    return ", ".join(f"{item.role} <@{item.user_id}>" for item in incident.roles)


def incident_root(*, incident: IncidentView, report: SnapshotReport | None = None) -> list[Block]:
    """The root message: what, status, who; findings go in the thread."""
    emoji = STATUS_EMOJI.get(incident.status, "")
    blocks = [
        header(f"{incident.key}: {incident.target}"),
        section(
            f"{emoji} *Status:* {incident.status}   *Severity:* {incident.severity or 'not yet known'}\n"
            f"*Workload:* `{incident.target}`\n*Roles:* {_roles_line(incident)}"
        ),
    ]
    if report is not None:
        layer = report.verdict.layer.value if report.verdict.layer else "undetermined"
        blocks.append(
            section(f"*Verdict:* {layer} ({report.verdict.confidence:.0%}) — {report.verdict.summary}")
        )
    elif incident.verdict_layer:
        blocks.append(section(f"*Failing layer (last snapshot):* {incident.verdict_layer}"))
    blocks.append(
        context(
            f"Opened by <@{incident.opened_by}> at {incident.opened_at:%Y-%m-%d %H:%M} UTC",
            "Everything about this incident is in the thread. `/triage help` lists what you can do.",
        )
    )
    return blocks


def incident_root_text(*, incident: IncidentView) -> str:
    """Notification fallback for the root message."""
    return f"{incident.key} {incident.status}: {incident.target}"


def snapshot_findings(*, incident_key: str, report: SnapshotReport, label: str = "") -> list[Block]:
    """Findings with their evidence (command, excerpt, expected vs observed), newest snapshot."""
    layer = report.verdict.layer.value if report.verdict.layer else "undetermined"
    title = f"Snapshot of {report.target}" + (f" ({label})" if label else "")
    blocks: list[Block] = [
        header(clip(title, limit=MAX_HEADER_TEXT)),
        section(
            f"*Verdict:* {layer} ({report.verdict.confidence:.0%}) — {report.verdict.summary}\n"
            f"Taken {report.taken_at:%Y-%m-%d %H:%M:%S} UTC in {report.elapsed_ms} ms."
        ),
    ]
    # Leave room for the header, verdict, tail context and a "more" line.
    room = MAX_BLOCKS - 4
    shown = report.findings[: room // 2]
    for finding in shown:
        sev = SEVERITY_EMOJI.get(finding.severity.value, "")
        where = finding.layer.value if finding.layer else "unknown layer"
        lines = [f"{sev} *{finding.severity.value}* · *{where}* · `{finding.rule}`", finding.summary]
        if finding.next_step:
            lines.append(f"*Next:* {finding.next_step}")
        blocks.append(section("\n".join(lines)))
        evidence = finding.evidence[0] if finding.evidence else None
        if evidence is not None:
            expected = (
                f"expected {evidence.expected}; observed {evidence.observed}" if evidence.expected else ""
            )
            blocks.append(
                context(
                    f"`{clip(evidence.command, limit=300)}` at {evidence.observed_at:%H:%M:%S} UTC",
                    clip(evidence.excerpt, limit=600) or "(no output)",
                    *([expected] if expected else []),
                )
            )
    if len(report.findings) > len(shown):
        blocks.append(
            section(f"…and {len(report.findings) - len(shown)} more finding(s) in the stored report.")
        )
    if not report.findings:
        blocks.append(section("No findings: nothing in the snapshot matched a known failure."))
    if report.not_checked:
        blocks.append(context("Not checked: " + "; ".join(report.not_checked)))
    return blocks


def snapshot_text(*, incident_key: str, report: SnapshotReport) -> str:
    """Notification fallback for the findings message."""
    layer = report.verdict.layer.value if report.verdict.layer else "undetermined"
    return f"{incident_key}: snapshot verdict {layer}, {len(report.findings)} finding(s)"


def open_list(*, incidents: Sequence[IncidentView]) -> list[Block]:
    """`/triage list`: one line per open incident."""
    if not incidents:
        return [section("No open incidents. :sparkles:")]
    lines = [
        f"*{item.key}* {STATUS_EMOJI.get(item.status, '')} {item.status} · `{item.target}` · "
        f"severity {item.severity or '?'} · commander {', '.join(f'<@{u}>' for u in item.holders('commander')) or 'none'}"
        for item in incidents
    ]
    blocks = [header(f"{len(incidents)} open incident(s)")]
    chunk: list[str] = []
    for line in lines:
        if sum(len(item) + 1 for item in chunk) + len(line) > MAX_SECTION_TEXT - 10:
            blocks.append(section("\n".join(chunk)))
            chunk = []
        chunk.append(line)
    if chunk:
        blocks.append(section("\n".join(chunk)))
    if len(blocks) > MAX_BLOCKS:
        blocks = blocks[: MAX_BLOCKS - 1] + [section("…more open incidents than fit in one message.")]
    return blocks


def timeline_line(*, incident_key: str, item: TimelineItem) -> str:
    """One thread reply for a timeline event."""
    return (
        f"{incident_key} · {item.at:%H:%M} UTC · <@{item.actor}>: {item.text}"
        if item.actor.startswith("U")
        else (f"{incident_key} · {item.at:%H:%M} UTC · {item.actor}: {item.text}")
    )


def help_blocks(*, usages: Iterable[tuple[str, str]]) -> list[Block]:
    """`/triage help`: every subcommand's usage and one-line summary."""
    lines = [f"`/triage {usage}` — {summary}" for usage, summary in usages]
    return [header("/triage subcommands"), section("\n".join(lines))]


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj.get("text", ""))
    return ""


def validate_blocks(blocks: Sequence[Block]) -> list[Block]:
    """Raise BlockLimitError if Slack would reject these blocks; return them unchanged otherwise."""
    problems: list[str] = []
    if len(blocks) > MAX_BLOCKS:
        problems.append(f"{len(blocks)} blocks (limit {MAX_BLOCKS})")
    for index, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "header":
            text = _text_of(block.get("text"))
            if block.get("text", {}).get("type") != "plain_text":
                problems.append(f"block {index}: header text must be plain_text")
            if len(text) > MAX_HEADER_TEXT:
                problems.append(f"block {index}: header text {len(text)} chars (limit {MAX_HEADER_TEXT})")
        elif kind == "section":
            text = _text_of(block.get("text"))
            if not text and not block.get("fields"):
                problems.append(f"block {index}: section needs text or fields")
            if len(text) > MAX_SECTION_TEXT:
                problems.append(f"block {index}: section text {len(text)} chars (limit {MAX_SECTION_TEXT})")
            for field in block.get("fields", []):
                if len(_text_of(field)) > 2000:
                    problems.append(f"block {index}: section field over 2000 chars")
        elif kind == "context":
            elements = block.get("elements", [])
            if not elements or len(elements) > MAX_CONTEXT_ELEMENTS:
                problems.append(
                    f"block {index}: context has {len(elements)} elements (1..{MAX_CONTEXT_ELEMENTS})"
                )
        elif kind == "actions":
            elements = block.get("elements", [])
            if not elements or len(elements) > 25:
                problems.append(f"block {index}: actions has {len(elements)} elements (1..25)")
            for element in elements:
                if element.get("type") == "button" and len(_text_of(element.get("text"))) > MAX_BUTTON_TEXT:
                    problems.append(f"block {index}: button text over {MAX_BUTTON_TEXT} chars")
        elif kind not in {"divider", "image", "input", "rich_text", "file", "video"}:
            problems.append(f"block {index}: unknown block type {kind!r}")
        accessory = block.get("accessory")
        if (
            isinstance(accessory, dict)
            and accessory.get("type") == "button"
            and len(_text_of(accessory.get("text"))) > MAX_BUTTON_TEXT
        ):
            problems.append(f"block {index}: button text over {MAX_BUTTON_TEXT} chars")
    if problems:
        raise BlockLimitError("; ".join(problems))
    return list(blocks)
