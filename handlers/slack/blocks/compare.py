"""Block Kit for the healthy comparison and the fabric scope, within Slack's limits; full text attached when cut."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bot import markup
from bot.diagnosis.compare import Difference
from bot.evidence.findings import Observation
from handlers.slack.blocks.findings import MAX_HEADER_TEXT, MAX_SECTION_TEXT, SEE_FILE, escape

MAX_DIFFERENCES_SHOWN = 20
MAX_EVENTS_SHOWN = 12
VALUE_CHARS = 300


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rendered:
    """Blocks, their notification text, and the full Markdown to attach when the message was shortened."""

    blocks: list[dict[str, Any]]
    text: str
    attachment: str | None


def _cut(text: str, *, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (markup.clip(text, limit=limit, marker=SEE_FILE), True)


def _header(text: str) -> dict[str, Any]:
    plain = text if len(text) <= MAX_HEADER_TEXT else text[: MAX_HEADER_TEXT - 1] + "…"
    return {"type": "header", "text": {"type": "plain_text", "text": plain, "emoji": True}}


def _section(text: str) -> tuple[dict[str, Any], bool]:
    fitted, cut = _cut(text, limit=MAX_SECTION_TEXT)
    return {"type": "section", "text": {"type": "mrkdwn", "text": fitted}}, cut


def _value(text: str) -> tuple[markup.Mrkdwn, bool]:
    fitted, cut = _cut(text, limit=VALUE_CHARS)
    return escape(fitted), cut


def comparison_markdown(*, incident_key: str, failing: str, healthy: str, differences: Sequence[Difference]) -> str:
    """Every difference, for the attached file."""
    lines = [f"# {incident_key}: `{failing}` compared with healthy `{healthy}`", "",
             "| rank | category | key | failing | healthy | why |", "|---|---|---|---|---|---|"]
    for item in differences:
        cells = [str(item.rank), item.category, item.key, item.failing, item.healthy, item.why]
        lines.append("| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def comparison(*, incident_key: str, failing: str, healthy: str, differences: Sequence[Difference]) -> Rendered:
    """Ranked differences, health signals first; the rest of a long diff goes to the attached file."""
    title = f"{incident_key}: what differs from healthy {healthy}"
    text = f"{incident_key}: {len(differences)} difference(s) between `{failing}` and healthy `{healthy}`"
    blocks: list[dict[str, Any]] = [_header(title)]
    if not differences:
        blocks.append(_section(markup.format(
            "No difference that could matter between `{}` and `{}` "
            "(placement, images, versions, resources, NCCL_/CUDA_ env, node conditions, event reasons).",
            failing, healthy))[0])
        return Rendered(blocks=blocks, text=text, attachment=None)
    shortened = len(differences) > MAX_DIFFERENCES_SHOWN
    blocks.append(_section(markup.format(
        "{} difference(s) between failing `{}` and healthy `{}`, most likely to matter first:",
        len(differences), failing, healthy))[0])
    for item in differences[:MAX_DIFFERENCES_SHOWN]:
        bad, cut_bad = _value(item.failing)
        good, cut_good = _value(item.healthy)
        block, cut = _section(markup.format(
            "*{}. {}* `{}`\nfailing: `{}`\nhealthy: `{}`\n_{}_", item.rank, item.category, item.key, bad, good, item.why))
        blocks.append(block)
        shortened = shortened or cut or cut_bad or cut_good
    if shortened:
        hidden = len(differences) - min(len(differences), MAX_DIFFERENCES_SHOWN)
        more = f"{hidden} more difference(s) and " if hidden else ""
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": markup.format("Shortened: {}the full values are in the attached file.", more)}]})
    attachment = (
        comparison_markdown(incident_key=incident_key, failing=failing, healthy=healthy, differences=differences)
        if shortened else None
    )
    return Rendered(blocks=blocks, text=text, attachment=attachment)


def _event_line(item: Observation) -> markup.Mrkdwn:
    fields = item.fields
    parts = [markup.format("host `{}`", fields.get("host"))]
    if fields.get("rank") is not None:
        parts.append(markup.format("rank {}", fields["rank"]))
    peer = fields.get("peer_host") or fields.get("peer")
    if peer:
        parts.append(markup.format("peer `{}`", peer))
    if fields.get("hca"):
        parts.append(markup.format("HCA `{}`", fields["hca"]))
    status = fields.get("status_text") or fields.get("status")
    if status is not None:
        parts.append(markup.format("status {}", status))
    line, _cut_line = _value(str(fields.get("line") or item.text))
    return markup.format("• {}: {}\n   `{}`", fields.get("error_type"), markup.join(", ", parts), line)


def fabric(*, incident_key: str, target: str, scope: dict[str, Any] | None,
           events: Sequence[Observation], hosts_with_logs: Sequence[str]) -> Rendered:
    """Node-local / path-local / fabric-wide, the hosts, ranks and HCA, and the NCCL lines that say so."""
    if scope is None:
        searched = markup.join(", ", (markup.format("`{}`", host) for host in hosts_with_logs)) or markup.Mrkdwn(
            "no host (no logs were collected)")
        text = f"{incident_key}: no NCCL transport error or timeout in the latest snapshot of `{target}`"
        return Rendered(blocks=[_header(f"{incident_key}: fabric evidence"), _section(markup.format(
            "No NCCL transport error or watchdog timeout in the latest snapshot of `{}`. "
            "Logs searched from: {}. The fabric layer is not implicated by the logs.", target, searched))[0]],
            text=text, attachment=None)
    hosts = markup.join(", ", (markup.format("`{}`", host) for host in scope.get("hosts") or ()))
    ranks = sorted({str(item.fields["rank"]) for item in events if item.fields.get("rank") is not None})
    hcas = sorted({str(item.fields["hca"]) for item in events if item.fields.get("hca")})
    summary = [markup.format("*Scope: {}*: {}", scope.get("scope"), scope.get("reason")),
               markup.format("hosts: {}", hosts or "none named")]
    if scope.get("pair"):
        summary.append(markup.format("path: {}", markup.join(" ⇄ ", (markup.format("`{}`", host) for host in scope["pair"]))))
    if scope.get("suspect_host"):
        summary.append(markup.format("suspect host: `{}`", scope["suspect_host"]))
    summary.append(markup.format("HCA: {}{}", markup.join(", ", (markup.format("`{}`", hca) for hca in hcas)) or "not named",
                                 markup.format(" (suspect `{}`)", scope["suspect_hca"]) if scope.get("suspect_hca") else ""))
    summary.append(markup.format("ranks: {}", ", ".join(ranks) or "not named in these lines"))
    summary.append(markup.format("{} transport error(s); {} NCCL event(s)", scope.get("error_count", len(events)), len(events)))
    text = f"{incident_key}: fabric scope {scope.get('scope')} ({', '.join(scope.get('hosts') or ())})"
    blocks = [_header(f"{incident_key}: fabric evidence for {target}"), _section(markup.lines(summary))[0]]
    evidence, cut = _section(markup.format("*Evidence* (`grep -E 'NCCL WARN|Watchdog'` on each host's log):\n{}",
                                           markup.lines([_event_line(item) for item in events[:MAX_EVENTS_SHOWN]])))
    blocks.append(evidence)
    shortened = cut or len(events) > MAX_EVENTS_SHOWN
    if shortened:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": "Shortened: every NCCL line is in the attached file."}]})
    attachment = None
    if shortened:
        attachment = "\n".join([f"# {incident_key}: fabric scope {scope.get('scope')}", str(scope.get("reason")), ""]
                               + [f"- {item.fields.get('host')}: {item.fields.get('line') or item.text}"
                                  for item in events]) + "\n"
    return Rendered(blocks=blocks, text=text, attachment=attachment)
