"""Slack Block Kit for a snapshot's findings: verdict first, grouped by layer, within Slack's limits.

Nothing is cut silently: when a text or the block budget would overflow, the message says so and the
full Markdown comes back as `attachment` for the caller to upload as a file.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bot import markup
from bot.evidence import findings, report
from handlers.render import markdown as findings_markdown
from handlers.slack.blocks import limits as block_limits
from handlers.slack.blocks.limits import (
    MAX_ACTION_VALUE,
    MAX_BLOCK_ID,
    MAX_BLOCKS,
    MAX_CONTEXT_ELEMENTS,
    MAX_CONTEXT_TEXT,
    MAX_HEADER_TEXT,
    MAX_SECTION_TEXT,
)

MAX_FALLBACK_TEXT = 3000
EXCERPT_CHARS = 600
RERUN_ACTION = "rerun_snapshot"
ASSIGN_ACTION = "assign_owner"
SEE_FILE = "… (shortened; the full evidence is in the attached file)"
_RESERVED_BLOCKS = 4  # overflow note, unexplained, divider, actions


@dataclasses.dataclass(frozen=True, kw_only=True)
class RenderedFindings:
    """Blocks for chat.postMessage, its notification text, and the full text to attach when shortened."""

    blocks: list[dict[str, Any]]
    text_fallback: str
    attachment: str | None


def escape(text: str) -> markup.Mrkdwn:
    """Workload text as inert mrkdwn (the one escape, `bot.markup.escape`)."""
    return markup.escape(text)


class _Budget:
    """Tracks whether anything was shortened, so the full text is attached."""

    def __init__(self) -> None:
        self.shortened = False

    def fit(self, text: str, *, limit: int) -> str:
        """Text within `limit`, marked (never silently) when shortened."""
        if len(text) <= limit:
            return text
        self.shortened = True
        return markup.clip(text, limit=limit, marker=SEE_FILE)

    def excerpt(self, text: str) -> markup.Mrkdwn:
        """A code-block excerpt of evidence (its backticks escaped), shortened for the message when long."""
        flat = escape(text)
        if len(flat) > EXCERPT_CHARS:
            self.shortened = True
            flat = markup.Mrkdwn(markup.clip(flat, limit=EXCERPT_CHARS, marker="\n" + SEE_FILE))
        return markup.format("```{}```", flat)


def _section(text: str, *, budget: _Budget) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": budget.fit(text, limit=MAX_SECTION_TEXT)}}


def _context(texts: list[str], *, budget: _Budget) -> dict[str, Any]:
    elements = [
        {"type": "mrkdwn", "text": budget.fit(text, limit=MAX_CONTEXT_TEXT)}
        for text in texts[:MAX_CONTEXT_ELEMENTS]
    ]
    return {"type": "context", "elements": elements}


def _header(text: str, *, budget: _Budget) -> dict[str, Any]:
    plain = text
    if len(text) > MAX_HEADER_TEXT:
        budget.shortened = True
        plain = text[: MAX_HEADER_TEXT - 1] + "…"
    return {"type": "header", "text": {"type": "plain_text", "text": plain, "emoji": True}}


def _verdict_text(*, verdict: findings.Verdict) -> markup.Mrkdwn:
    if findings_markdown.no_current_failure(verdict):
        return markup.format("*Verdict: no current failure* (no layer)\n{}", verdict.summary)
    if verdict.layer is None:
        return markup.format("*Verdict: layer unknown*\n{}", verdict.summary)
    scope = markup.format(" · scope `{}`", verdict.scope.value) if verdict.scope else markup.format("")
    nodes = findings_markdown.scope_nodes_text(verdict)
    if nodes:
        scope = scope + markup.format(" ({})", nodes)
    return markup.format(
        "*Verdict: `{}`*{} · confidence {:.2f}\n{}", verdict.layer.value, scope, verdict.confidence, verdict.summary
    )


def _finding_blocks(*, item: findings.Finding, budget: _Budget) -> list[dict[str, Any]]:
    """One section (summary, excerpt, expected vs observed, next) and one context (command, time)."""
    lines = [markup.format("*{}* {}", item.severity.value.upper(), item.summary)]
    if item.caused_by:
        lines.append(markup.format("_caused by_ `{}` (downstream symptom)", item.caused_by))
    if not item.current:
        lines.append(markup.format("_history:_ {}", item.resolved_by or "recovered since"))
    evidence = item.evidence[0] if item.evidence else None
    if evidence is not None:
        lines.append(budget.excerpt(evidence.excerpt))
        if evidence.expected or evidence.observed:
            lines.append(
                markup.format("*Expected:* {}\n*Observed:* {}", evidence.expected or "n/a", evidence.observed or "n/a")
            )
    lines.append(markup.format("*Next:* `{}`", item.next_step))
    context = [
        markup.format("rule `{}`", item.rule)
        + (markup.format(" · scope `{}`", item.scope.value) if item.scope else "")
    ]
    if evidence is not None:
        context.append(markup.format("`{}` at {}", evidence.command or "n/a", findings._plain(evidence.observed_at)))
    if len(item.evidence) > 1:
        budget.shortened = True
        context.append(markup.format("+{} more evidence item(s) in the attached file", len(item.evidence) - 1))
    return [_section(markup.lines(lines), budget=budget), _context(context, budget=budget)]


def _actions(*, incident_key: str) -> dict[str, Any]:
    value = incident_key[:MAX_ACTION_VALUE]
    return {
        "type": "actions",
        # Same convention as the records area's assign_owner handler, which reads the key from block_id.
        "block_id": f"assign_{value}"[:MAX_BLOCK_ID],
        "elements": [
            {
                "type": "button",
                "action_id": RERUN_ACTION,
                "value": value,
                "text": {"type": "plain_text", "text": "Re-run snapshot"},
            },
            {
                # A user picker: choosing someone assigns them as owner (the key rides in block_id).
                "type": "users_select",
                "action_id": ASSIGN_ACTION,
                "placeholder": {"type": "plain_text", "text": "Assign owner"},
            },
        ],
    }


def render_findings(*, snapshot: report.SnapshotReport, incident_key: str) -> RenderedFindings:
    """The findings message; `attachment` carries the full Markdown whenever the message shortened anything."""
    budget = _Budget()
    verdict = snapshot.verdict
    blocks: list[dict[str, Any]] = [
        _header(f"Findings: {snapshot.target}", budget=budget),
        _section(_verdict_text(verdict=verdict), budget=budget),
        _context(
            [
                markup.format("snapshot {} · {} ms", findings._plain(snapshot.taken_at), snapshot.elapsed_ms),
                markup.format("{} finding(s) · {} unexplained", len(snapshot.findings), len(snapshot.unexplained)),
            ]
            + ([markup.format("not checked: {}", ", ".join(snapshot.not_checked))] if snapshot.not_checked else [])
            + ([markup.format("followed one hop: {}", "; ".join(snapshot.followed))] if snapshot.followed else []),
            budget=budget,
        ),
    ]
    omitted = 0
    for layer, members in findings_markdown.findings_by_layer(items=snapshot.findings, first=verdict.layer):
        if len(blocks) + 3 > MAX_BLOCKS - _RESERVED_BLOCKS:
            omitted += len(members)
            continue
        blocks.append(_header(f"{layer} ({len(members)})", budget=budget))
        for item in members:
            if len(blocks) + 2 > MAX_BLOCKS - _RESERVED_BLOCKS:
                omitted += 1
                continue
            blocks.extend(_finding_blocks(item=item, budget=budget))
    if omitted:
        budget.shortened = True
        blocks.append(
            _section(
                markup.format("*{} more finding(s)* did not fit in this message: see the attached file.", omitted),
                budget=budget,
            )
        )
    if snapshot.unexplained:
        listed = markup.lines(
            [markup.format("• `{}` {}: {}", obs.kind, obs.subject, obs.text[:200]) for obs in snapshot.unexplained[:10]]
        )
        more = len(snapshot.unexplained) - 10
        if more > 0:
            budget.shortened = True
            listed += markup.format("\n… and {} more in the attached file", more)
        blocks.append(_section(markup.format("*Unexplained evidence (no rule matched)*\n{}", listed), budget=budget))
    blocks += [{"type": "divider"}, _actions(incident_key=incident_key)]
    fallback = findings_markdown.verdict_line(verdict=verdict) + f" {len(snapshot.findings)} finding(s)."
    if len(fallback) > MAX_FALLBACK_TEXT:
        fallback = fallback[: MAX_FALLBACK_TEXT - 1] + "…"
        budget.shortened = True
    attachment = findings_markdown.render_markdown(snapshot=snapshot) if budget.shortened else None
    return RenderedFindings(blocks=blocks, text_fallback=fallback, attachment=attachment)


def validate_blocks(blocks: list[dict[str, Any]]) -> list[str]:
    """Every Slack limit these blocks break (empty when Slack would accept them)."""
    return block_limits.problems(blocks)