"""The one Markdown of a snapshot: verdict, findings by layer with full evidence, the healthy comparison,
placement and what each collector did. The Slack file attachment and `triage job --format markdown` use it."""

from __future__ import annotations

from collections.abc import Sequence

from bot.diagnosis.compare import Difference
from bot.evidence import findings, report

LAYER_ORDER = ("scheduler", "runtime", "workflow", "fabric")


def no_current_failure(verdict: findings.Verdict) -> bool:
    """The target is not failing now (its history and what was checked are in the summary)."""
    return verdict.layer is None and verdict.summary.startswith("No current failure")


def scope_nodes_text(verdict: findings.Verdict) -> str:
    """`a <-> b` for a path, the node for node-local, a few nodes otherwise; empty when none or many."""
    nodes = verdict.scope_nodes
    if not nodes or len(nodes) > 3:
        return ""
    return " <-> ".join(nodes) if verdict.scope is findings.Scope.PATH_LOCAL and len(nodes) == 2 else ", ".join(nodes)


def verdict_line(*, verdict: findings.Verdict) -> str:
    """One line: the layer (or unknown / no current failure), scope and confidence, then the summary."""
    if no_current_failure(verdict):
        return f"Verdict: no current failure (no layer). {verdict.summary}"
    if verdict.layer is None:
        return f"Verdict: layer unknown (confidence {verdict.confidence:.2f}). {verdict.summary}"
    scope = f", {verdict.scope.value}" if verdict.scope else ""
    where = f" {scope_nodes_text(verdict)}" if scope_nodes_text(verdict) else ""
    return f"Verdict: {verdict.layer.value}{scope}{where} (confidence {verdict.confidence:.2f}). {verdict.summary}"


UNCLASSIFIED = "no layer"
HISTORY = "history (resolved since; not the verdict)"


def findings_by_layer(
    *, items: tuple[findings.Finding, ...], first: findings.Layer | None
) -> list[tuple[str, list[findings.Finding]]]:
    """Current findings grouped by layer, the verdict's layer first, then the seeds' order; layerless ones, then
    history (findings whose every observation has since recovered) last."""
    order = ([first.value] if first else []) + [
        name for name in LAYER_ORDER if not first or name != first.value
    ]
    current = [item for item in items if item.current]
    groups = []
    for name in order:
        members = [item for item in current if item.layer is not None and item.layer.value == name]
        if members:
            groups.append((name, members))
    layerless = [item for item in current if item.layer is None]
    if layerless:
        groups.append((UNCLASSIFIED, layerless))
    history = [item for item in items if not item.current]
    if history:
        groups.append((HISTORY, history))
    return groups


def _evidence_lines(*, evidence: findings.Evidence) -> list[str]:
    stamp = findings._plain(evidence.observed_at)
    lines = [f"- source: {evidence.source}; command: `{evidence.command or 'n/a'}`; observed at {stamp}"]
    if evidence.expected or evidence.observed:
        lines.append(f"  - expected: {evidence.expected or 'n/a'}")
        lines.append(f"  - observed: {evidence.observed or 'n/a'}")
    lines.append("  ```")
    lines.extend(f"  {line}" for line in evidence.excerpt.splitlines() or [""])
    lines.append("  ```")
    return lines


def render_markdown(*, snapshot: report.SnapshotReport, differences: Sequence[Difference] | None = None) -> str:
    """Everything, nothing shortened: the full record behind a Slack summary, and the terminal's Markdown."""
    lines = [
        f"# Snapshot of `{snapshot.target}` ({snapshot.target_kind or 'unknown kind'})",
        "",
        f"Snapshot taken {findings._plain(snapshot.taken_at)} in {snapshot.elapsed_ms} ms.",
        "",
        verdict_line(verdict=snapshot.verdict),
        "",
    ]
    for layer, members in findings_by_layer(items=snapshot.findings, first=snapshot.verdict.layer):
        lines += [f"## {layer}", ""]
        for item in members:
            scope = f" [{item.scope.value}]" if item.scope else ""
            lines.append(f"### {item.severity.value}: {item.summary}{scope}")
            lines.append(f"rule `{item.rule}`; subject {item.subject or 'n/a'}")
            if item.caused_by:
                lines.append(f"caused by `{item.caused_by}` (downstream symptom, not a separate verdict)")
            if not item.current:
                lines.append(f"history: {item.resolved_by or 'the object has recovered since'}")
            for evidence in item.evidence:
                lines.extend(_evidence_lines(evidence=evidence))
            lines += [f"Next: `{item.next_step}`", ""]
    if snapshot.unexplained:
        lines += ["## Unexplained evidence (no rule matched)", ""]
        for obs in snapshot.unexplained:
            lines.append(f"- {obs.kind} {obs.subject}: `{obs.command}` at {findings._plain(obs.observed_at)}")
            lines.extend(f"  {line}" for line in obs.text.splitlines() or [""])
        lines.append("")
    if differences:
        lines += ["## Compared with the healthy run", "", "| category | key | failing | healthy |", "|---|---|---|---|"]
        lines += [f"| {d.category} | {d.key} | {d.failing} | {d.healthy} |" for d in differences]
        lines.append("")
    if snapshot.placement:
        lines += ["## Versions and placement", ""] + [f"- {key}: {value}" for key, value in snapshot.placement.items()]
        lines.append("")
    if snapshot.followed:
        lines += ["## Followed one hop beyond the target", ""] + [f"- {item}" for item in snapshot.followed] + [""]
    if snapshot.not_checked:
        lines += ["## Not checked", ""] + [f"- {item}" for item in snapshot.not_checked] + [""]
    if snapshot.collectors:
        lines += ["## Collectors", ""]
        lines += [
            f"- {c.name}: {c.outcome.value}, {c.items} items, {c.elapsed_ms} ms"
            + (" (truncated)" if c.truncated else "")
            + (f" — {c.detail}" if c.detail else "")
            for c in snapshot.collectors
        ]
        lines.append("")
    return "\n".join(lines)
