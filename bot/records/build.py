"""Handoff and postmortem records assembled from an incident's data; gaps stay visible as gaps.

The records are plain data (`HandoffRecord`, `PostmortemRecord`), rendered to Markdown by Jinja2
templates in `templates/` and to JSON by `to_dict()`. Narrative that only a human knows (summary,
impact, root cause, remediation, next action) comes from notes that start with a label, e.g.
`/triage note root cause: ...`; the latest note per label wins. Everything else is taken from the
snapshots, findings, roles, changes, prevention actions and validation windows.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import jinja2

from bot import markup
from bot.changes.prevention import PreventionView
from bot.changes.service import ChangeState, ChangeView
from bot.evidence.findings import _plain, utcnow

GAP = "_not recorded_"
NARRATIVE_LABELS = ("summary", "impact", "root cause", "remediation", "next")
_LABEL_PATTERN = re.compile(
    r"^\s*(?P<label>summary|impact|root[ _-]?cause|remediation|next(?: action)?)\s*:\s*(?P<text>.+)$",
    re.IGNORECASE | re.DOTALL,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoleEntry:
    """Who holds a role."""

    role: str
    user: str
    assigned_at: datetime | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimelineItem:
    """One timeline entry."""

    at: datetime
    kind: str
    actor: str
    text: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class IncidentData:
    """Everything the records draw on, loaded from storage (or built by hand in tests and the demo).

    `snapshots` are SnapshotReport dicts in the stable schema (with observations when kept);
    `validations` are the results of validation-window jobs, oldest first.
    """

    key: str
    title: str
    target: str
    severity: str
    status: str
    opened_at: datetime
    opened_by: str = ""
    channel: str = ""
    cluster: str = ""  # the named cluster; "" when opened before clusters had names
    resolved_at: datetime | None = None
    roles: tuple[RoleEntry, ...] = ()
    timeline: tuple[TimelineItem, ...] = ()
    snapshots: tuple[Mapping[str, Any], ...] = ()
    changes: tuple[ChangeView, ...] = ()
    prevention: tuple[PreventionView, ...] = ()
    validations: tuple[Mapping[str, Any], ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommandEntry:
    """A command someone (or the bot) ran, when, and what it showed."""

    command: str
    at: str
    source: str
    excerpt: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExpectedObserved:
    """One evidence check: what should have been seen against what was."""

    source: str
    command: str
    expected: str
    observed: str
    at: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChangeSummary:
    """A change as the records show it."""

    id: int
    what: str
    variable: str
    state: str
    expected_effect: str
    metric: str
    rollback_plan: str
    approved_by: str
    proposed_at: str
    applied_at: str | None
    closed_at: str | None
    gain_repeated: bool
    measurements: tuple[str, ...]
    chart_file: str | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreventionSummary:
    """A prevention action as the records show it."""

    id: int
    description: str
    owner: str
    due_on: str
    guardrail_check: str
    status: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class HandoffRecord:
    """The seeds' handoff: another operator continues from this without asking."""

    key: str
    title: str
    status: str
    severity: str
    generated_at: str
    target: str
    cluster: str | None
    scope: str | None
    failing_layer: str | None
    verdict: str | None
    owner: str | None
    owner_role: str | None
    commander: str | None
    other_roles: tuple[str, ...]
    placement: tuple[tuple[str, str], ...]
    commands: tuple[CommandEntry, ...]
    expected_vs_observed: tuple[ExpectedObserved, ...]
    changes: tuple[ChangeSummary, ...]
    noted_changes: tuple[TimelineItem, ...]
    limitations: tuple[str, ...]
    next_action: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return _plain(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PostmortemRecord:
    """The seeds' one record: root cause, remediation and prevention together."""

    key: str
    title: str
    status: str
    severity: str
    generated_at: str
    summary: str | None
    impact: str | None
    cluster: str | None
    opened_at: str
    resolved_at: str | None
    duration: str | None
    timeline: tuple[TimelineItem, ...]
    failing_layer: str | None
    verdict: str | None
    layer_evidence: tuple[CommandEntry, ...]
    root_cause: str | None
    remediation: str | None
    tried_and_rejected: tuple[ChangeSummary, ...]
    changes: tuple[ChangeSummary, ...]
    prevention: tuple[PreventionSummary, ...]
    recurrence_check: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return _plain(self)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else _plain(value)


def narrative(*, timeline: tuple[TimelineItem, ...]) -> dict[str, str]:
    """Labelled notes (`root cause: ...`), latest per label, keyed by the canonical label."""
    found: dict[str, str] = {}
    for item in sorted(timeline, key=lambda entry: entry.at):
        match = _LABEL_PATTERN.match(item.text or "")
        if not match:
            continue
        label = match.group("label").lower().replace("_", " ").replace("-", " ")
        label = "root cause" if label.replace(" ", "") == "rootcause" else label
        label = "next" if label.startswith("next") else label
        found[label] = match.group("text").strip()
    return found


def _latest_snapshot(data: IncidentData) -> Mapping[str, Any] | None:
    return data.snapshots[-1] if data.snapshots else None


def _first_snapshot(data: IncidentData) -> Mapping[str, Any] | None:
    return data.snapshots[0] if data.snapshots else None


def chart_filename(*, key: str, change_id: int) -> str:
    """Where a change's chart lives next to the Markdown (and in the bundle)."""
    return f"charts/{key}-change-{change_id}.png"


def _change_summary(*, key: str, change: ChangeView) -> ChangeSummary:
    closed = change.rolled_back_at if change.state is ChangeState.ROLLED_BACK else change.validated_at
    return ChangeSummary(
        id=change.id,
        what=change.what,
        variable=change.variable,
        state=change.state.value,
        expected_effect=change.expected_effect,
        metric=change.metric,
        rollback_plan=change.rollback_plan,
        approved_by=change.approved_by,
        proposed_at=_iso(change.proposed_at) or "",
        applied_at=_iso(change.applied_at),
        closed_at=_iso(closed),
        gain_repeated=change.gain_repeated,
        measurements=tuple(
            f"{item.window}: {item.value:g} {item.unit} (baseline {item.baseline:g}, threshold {item.threshold:g}, "
            f"at {_utc(item.taken_at)})"
            for item in change.measurements
        ),
        chart_file=chart_filename(key=key, change_id=change.id) if change.measurements else None,
    )


def evidence_commands(*, snapshots: tuple[Mapping[str, Any], ...]) -> tuple[CommandEntry, ...]:
    """Every command behind the findings and observations, once each, with the last time it ran."""
    latest: dict[str, CommandEntry] = {}
    for snapshot in snapshots:
        items: list[tuple[str, str, str, str]] = []
        for finding in snapshot.get("findings", ()):
            for evidence in finding.get("evidence", ()):
                items.append(
                    (
                        evidence.get("command", ""),
                        evidence.get("observed_at", ""),
                        evidence.get("source", ""),
                        evidence.get("excerpt", ""),
                    )
                )
        for observation in snapshot.get("observations", ()):
            items.append(
                (
                    observation.get("command", ""),
                    observation.get("observed_at", ""),
                    observation.get("source", ""),
                    observation.get("text", ""),
                )
            )
        for command, at, source, excerpt in items:
            if not command:
                continue
            # A command re-run by a later snapshot is listed once, at the last time it ran.
            if command not in latest or at >= latest[command].at:
                latest[command] = CommandEntry(command=command, at=at, source=source, excerpt=excerpt[:500])
    return tuple(sorted(latest.values(), key=lambda entry: entry.at))


def _expected_vs_observed(*, snapshots: tuple[Mapping[str, Any], ...]) -> tuple[ExpectedObserved, ...]:
    """Each distinct expected-vs-observed pair once, at the last snapshot that showed it."""
    rows: dict[tuple[str, str, str], ExpectedObserved] = {}
    for snapshot in snapshots:
        for finding in snapshot.get("findings", ()):
            for evidence in finding.get("evidence", ()):
                if evidence.get("expected") or evidence.get("observed"):
                    key = (evidence.get("command", ""), evidence.get("expected", ""), evidence.get("observed", ""))
                    rows[key] = (
                        ExpectedObserved(
                            source=evidence.get("source", ""),
                            command=evidence.get("command", ""),
                            expected=evidence.get("expected", ""),
                            observed=evidence.get("observed", ""),
                            at=evidence.get("observed_at", ""),
                        )
                    )
    return tuple(sorted(rows.values(), key=lambda row: row.at))


def _limitations(data: IncidentData) -> tuple[str, ...]:
    notes: list[str] = []
    latest = _latest_snapshot(data)
    if latest is None:
        notes.append("No diagnostic snapshot was taken: every layer is unchecked.")
    else:
        notes.extend(f"Not checked: {item}" for item in latest.get("not_checked", ()))
        for collector in latest.get("collectors", ()):
            if collector.get("outcome") not in ("ok", None):
                detail = f" ({collector.get('detail')})" if collector.get("detail") else ""
                notes.append(f"Collector {collector.get('name')} ended {collector.get('outcome')}{detail}.")
        unexplained = latest.get("unexplained", ())
        if unexplained:
            notes.append(f"{len(unexplained)} observation(s) matched no rule and remain unexplained.")
        if (latest.get("verdict") or {}).get("layer") is None:
            notes.append("The evidence did not isolate a failing layer.")
    for change in data.changes:
        windows = {item.window for item in change.measurements}
        if change.state in (ChangeState.PROPOSED, ChangeState.APPLIED):
            notes.append(
                f"Change #{change.id} ({change.variable}) is {change.state.value} and unvalidated "
                f"({len(windows)} measured window(s))."
            )
    pending = [item for item in data.validations if item.get("pending")]
    if pending:
        notes.append(f"{len(pending)} validation window(s) have not run yet.")
    return tuple(notes)


def _role(data: IncidentData, role: str) -> str | None:
    holders = [item.user for item in data.roles if item.role == role]
    return holders[-1] if holders else None


def build_handoff(*, data: IncidentData, now: datetime | None = None) -> HandoffRecord:
    """Assemble the handoff from the incident's data."""
    latest = _latest_snapshot(data)
    verdict = (latest or {}).get("verdict") or {}
    told = narrative(timeline=data.timeline)
    next_action = told.get("next")
    if next_action is None and latest is not None:
        steps = [finding.get("next") for finding in latest.get("findings", ()) if finding.get("next")]
        next_action = steps[0] if steps else None
    owners = [(item.role, item.user) for item in data.roles if item.role == "owner"]
    owners += [(item.role, item.user) for item in data.roles if item.role.startswith("owner:")]
    owner = owners[0] if owners else None  # a layer owner answers when nobody owns the whole incident
    return HandoffRecord(
        key=data.key,
        title=data.title,
        status=data.status,
        severity=data.severity,
        generated_at=_iso(now or utcnow()) or "",
        target=data.target,
        cluster=data.cluster or None,
        scope=verdict.get("scope"),
        failing_layer=verdict.get("layer"),
        verdict=verdict.get("summary"),
        owner=owner[1] if owner else None,
        owner_role=owner[0] if owner else None,
        commander=_role(data, "commander"),
        other_roles=tuple(
            markup.format("{}: {}", item.role, markup.mention(item.user))
            for item in data.roles
            if item.role != "commander" and (item.role, item.user) != owner
        ),
        placement=tuple(sorted((latest or {}).get("placement", {}).items())),
        commands=evidence_commands(snapshots=data.snapshots),
        expected_vs_observed=_expected_vs_observed(snapshots=data.snapshots),
        changes=tuple(_change_summary(key=data.key, change=change) for change in data.changes),
        noted_changes=tuple(
            item for item in data.timeline if item.kind == "note" and "rollback" in (item.text or "").lower()
        ),
        limitations=_limitations(data),
        next_action=next_action,
    )


def _duration(start: datetime, end: datetime | None) -> str | None:
    if end is None:
        return None
    minutes = int((end - start).total_seconds() // 60)
    return f"{minutes // 60}h {minutes % 60:02d}m"


def _recurrence(data: IncidentData) -> tuple[str, ...]:
    lines: list[str] = []
    for result in data.validations:
        if result.get("pending"):
            continue
        if result.get("unavailable"):
            lines.append(
                f"Validation window {result.get('window')} after change #{result.get('change_id')}: not run "
                f"({result.get('unavailable')})."
            )
            continue
        state = "STILL REPRODUCES" if result.get("reproduces") else "does not reproduce"
        rules = ", ".join(result.get("still_reproducing_rules", ())) or ", ".join(
            result.get("original_rules", ())
        )
        lines.append(
            f"Validation window {result.get('window')} after change #{result.get('change_id')} "
            f"({result.get('taken_at')}): original failure {state} (rules: {rules or 'none recorded'})."
        )
    lines.extend(
        f"Guardrail for prevention #{item.id} ({item.status}): {item.guardrail_check}"
        for item in data.prevention
    )
    return tuple(lines)


def build_postmortem(*, data: IncidentData, now: datetime | None = None) -> PostmortemRecord:
    """Assemble the postmortem from the incident's data."""
    told = narrative(timeline=data.timeline)
    first = _first_snapshot(data) or {}
    verdict = first.get("verdict") or {}
    layer = verdict.get("layer")
    proving = [
        finding
        for finding in first.get("findings", ())
        if layer is not None and finding.get("layer") == layer
    ]
    changes = tuple(_change_summary(key=data.key, change=change) for change in data.changes)
    rejected = tuple(
        item
        for item, change in zip(changes, data.changes, strict=True)
        if change.state is ChangeState.ROLLED_BACK or (change.measurements and not change.gain_repeated)
    )
    remediation = told.get("remediation")
    if remediation is None:
        kept = [f"#{item.id} {item.what}" for item in changes if item.state == ChangeState.VALIDATED.value]
        remediation = "Validated change(s): " + "; ".join(kept) if kept else None
    return PostmortemRecord(
        key=data.key,
        title=data.title,
        status=data.status,
        severity=data.severity,
        generated_at=_iso(now or utcnow()) or "",
        summary=told.get("summary"),
        impact=told.get("impact"),
        cluster=data.cluster or None,
        opened_at=_iso(data.opened_at) or "",
        resolved_at=_iso(data.resolved_at),
        duration=_duration(data.opened_at, data.resolved_at),
        timeline=tuple(sorted(data.timeline, key=lambda item: item.at)),
        failing_layer=layer,
        verdict=verdict.get("summary"),
        layer_evidence=evidence_commands(snapshots=({"findings": proving},)),
        root_cause=told.get("root cause"),
        remediation=remediation,
        tried_and_rejected=rejected,
        changes=changes,
        prevention=tuple(
            PreventionSummary(
                id=item.id,
                description=item.description,
                owner=item.owner,
                due_on=item.due_on.isoformat(),
                guardrail_check=item.guardrail_check,
                status=item.status,
            )
            for item in data.prevention
        ),
        recurrence_check=_recurrence(data),
    )


def _gap(value: object) -> object:
    """Empty values render as an explicit gap, never as nothing."""
    if value is None or value == "" or value == () or value == []:
        return GAP
    return value


def _utc(value: object) -> str:
    """Timestamps as `2026-11-20 14:03:07 UTC`; anything unreadable is shown as it is."""
    if value is None or value == "":
        return GAP
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(value)


def _environment(*, escaped: bool = False) -> jinja2.Environment:
    """The templates' environment; `escaped` passes every value through `markup.escape` (Slack text)."""
    folder = resources.files("templates")
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Markdown, not HTML
        finalize=markup.escape if escaped else None,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["gap"] = _gap
    environment.filters["utc"] = _utc
    environment.globals["GAP"] = GAP
    return environment


def render_handoff(*, record: HandoffRecord) -> str:
    """The handoff as Markdown."""
    return _environment().get_template("handoff.md.j2").render(r=record)


def render_handoff_mrkdwn(*, record: HandoffRecord) -> markup.Mrkdwn:
    """The handoff as a Slack message: the template is the bot's markup (its mentions stay live), every
    value in it (notes, evidence, workload text) is escaped, so nothing a workload or user wrote is live."""
    return markup.Mrkdwn(_environment(escaped=True).get_template("handoff.md.j2").render(r=record))


def render_postmortem(*, record: PostmortemRecord) -> str:
    """The postmortem as Markdown."""
    return _environment().get_template("postmortem.md.j2").render(r=record)
