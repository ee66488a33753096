"""The incident lifecycle: open (one per workload), status, roles, notes, snapshots and the timeline.

Every method is one transaction: it either happens entirely (state change plus its timeline entry)
or not at all. Callers get plain, frozen views, never ORM rows.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from bot.config import Settings
from bot.evidence import findings, redact
from bot.evidence.report import Diagnoser, SnapshotReport
from bot.evidence.targets import Target, parse_target
from bot.evidence.text import printable
from bot.incidents import policy as rulebook
from bot.incidents.errors import IncidentError, IncidentNotFound
from bot.incidents.policy import BOT_ACTOR, MULTI_HOLDER_ROLES, Policy
from storage.db import Engine, IntegrityError, session_scope
from storage.repositories import channels as channel_repo
from storage.repositories import incidents as incident_repo
from storage.tables.incidents import (
    INCIDENT_STATUSES,
    Incident,
    ProcessedRequest,
    RoleAssignment,
    Snapshot,
    TimelineEntry,
)

STATUSES = INCIDENT_STATUSES
MAX_NOTE_CHARS = 3000
OPEN_ATTEMPTS = 5
SEVERITIES = tuple(item.value for item in findings.Severity)
SNAPSHOT_STARTED = "snapshot_started"
SNAPSHOT_INTERRUPTED = "snapshot_interrupted"
SNAPSHOT_KINDS = frozenset({SNAPSHOT_STARTED, "snapshot", "snapshot_failed", SNAPSHOT_INTERRUPTED})

if TYPE_CHECKING:
    from bot.clusters.registry import Clusters


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoleView:
    """One current role holder."""

    role: str
    user_id: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class IncidentView:
    """An incident as the edges see it."""

    key: str
    title: str
    target: str
    workload_key: str
    status: str
    severity: str | None
    verdict_layer: str | None
    channel_id: str
    thread_ts: str | None
    opened_by: str
    opened_at: datetime
    updated_at: datetime
    resolved_at: datetime | None
    roles: tuple[RoleView, ...] = ()
    cluster: str = ""  # the named cluster; "" when opened before clusters had names (the default one)

    @property
    def is_open(self) -> bool:
        """Open until resolved."""
        return self.status != "resolved"

    def holders(self, role: str) -> tuple[str, ...]:
        """User ids currently holding `role`."""
        return tuple(item.user_id for item in self.roles if item.role == role)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TimelineItem:
    """One timeline entry."""

    at: datetime
    actor: str
    kind: str
    text: str
    data: dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpenResult:
    """What `open_for_target` did: opened a new incident, or found the open one."""

    incident: IncidentView
    created: bool


def worst_severity(report: SnapshotReport) -> str | None:
    """The most severe finding's severity, or None when nothing was found."""
    if not report.findings:
        return None
    return min((finding.severity for finding in report.findings), key=lambda item: item.rank).value


class IncidentService:
    """The lifecycle over one database; the diagnoser is injected so no cluster is assumed."""

    def __init__(
        self,
        *,
        engine: Engine,
        diagnoser: Diagnoser | None,
        clock: Callable[[], datetime] = findings.utcnow,
        policy: Policy | None = None,
        clusters: Clusters | None = None,
    ) -> None:
        self.engine = engine
        self.diagnoser = diagnoser
        self.clusters = clusters  # None: targets are taken as typed, incidents carry no cluster name
        self.clock = clock
        # Tells this process's snapshots from those of an earlier run of the same instance.
        self.boot_id = uuid.uuid4().hex
        self.policy = policy or Policy()

    # --- opening -------------------------------------------------------------------------------

    def open_for_target(self, *, target: Target, channel_id: str, opened_by: str, title: str | None = None,
                        severity: str | None = None) -> OpenResult:
        """Open an incident for the workload on its cluster (the one named, else the channel's default, else
        the only or default one of its kind), or return the one already open there (never two); raises
        ClusterError (an InvalidTarget) when the id names no usable cluster. Alert intake names the alert in
        `title` and sets its rule's initial `severity` (a snapshot's findings set it after)."""
        if severity is not None and severity not in SEVERITIES:
            raise IncidentError(f"`{severity[:20]}` is not a severity. Use one of: {', '.join(SEVERITIES)}.")
        for attempt in range(OPEN_ATTEMPTS):
            try:
                return self._open_once(target=target, channel_id=channel_id, opened_by=opened_by,
                                       title=title, severity=severity)
            except IntegrityError:
                # Another replica (or a Slack retry) opened this workload, or took the next number,
                # between our read and our insert; the next pass finds theirs or takes the next one.
                if attempt == OPEN_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def _open_once(self, *, target: Target, channel_id: str, opened_by: str, title: str | None = None,
                   severity: str | None = None) -> OpenResult:
        with session_scope(self.engine) as session:
            target, cluster, lookup = self._place(session, target=target, channel_id=channel_id)
            existing = incident_repo.open_for_workload(session, workload_key=target.workload_key, clusters=lookup)
            if existing is not None:
                return OpenResult(incident=self._view(session, existing), created=False)
            now = self.clock()
            number = incident_repo.next_number(session)
            incident = Incident(
                number=number,
                key=f"INC-{number:04d}",
                title=(title or f"{target.key} needs triage")[:400],
                severity=severity,
                target=target.key,
                target_platform=target.platform.value,
                workload_key=target.workload_key,
                cluster=cluster,
                status="investigating",
                channel_id=channel_id,
                opened_by=opened_by,
                opened_at=now,
                updated_at=now,
            )
            session.add(incident)
            session.flush()
            self._entry(session, incident, actor=opened_by, kind="opened", text=f"Opened for `{target.key}`")
            self._grant(session, incident, role="commander", user_id=opened_by, actor=opened_by)
            session.flush()
            return OpenResult(incident=self._view(session, incident), created=True)

    def _place(self, session: Any, *, target: Target, channel_id: str) -> tuple[Target, str, tuple[str, ...]]:
        """(canonical target, its cluster's name, the cluster values its open incident may be stored under)."""
        if self.clusters is None:
            return target, target.cluster or "", (target.cluster or "",)
        prefer = channel_repo.cluster_for(session, channel_id=channel_id) if channel_id else None
        spec = self.clusters.spec_for(target, prefer=prefer)
        canonical = self.clusters.canonical(dataclasses.replace(target, cluster=spec.name))
        unnamed = self.clusters.default_for(target.platform) is spec  # "" rows: opened on the default cluster
        return canonical, spec.name, (spec.name, "") if unnamed else (spec.name,)

    def snapshot_target(self, incident: IncidentView) -> Target:
        """The incident's workload as diagnose() takes it: on the cluster it was opened on."""
        parsed = parse_target(incident.target)
        if parsed.cluster or not incident.cluster or self.clusters is None:
            return parsed
        return self.clusters.canonical(dataclasses.replace(parsed, cluster=incident.cluster))

    # --- channel defaults ----------------------------------------------------------------------------

    def channel_cluster(self, *, channel_id: str) -> str | None:
        """The cluster ids without `<cluster>:` mean in this channel, when one was set."""
        with session_scope(self.engine) as session:
            return channel_repo.cluster_for(session, channel_id=channel_id)

    def set_channel_cluster(self, *, channel_id: str, cluster: str | None, actor: str) -> str | None:
        """Set (or clear, with None) the channel's default cluster; returns the previous one. The cluster must
        be configured, and the caller allowed to cause cluster reads (the default steers them)."""
        self.policy.require_cluster_read(actor=actor, what="set a channel's default cluster")
        if cluster is not None and self.clusters is not None:
            cluster = self.clusters.get(cluster).name
        with session_scope(self.engine) as session:
            return channel_repo.set_cluster(session, channel_id=channel_id, cluster=cluster, actor=actor,
                                            at=self.clock())

    def attach_root_message(self, *, incident_key: str, channel_id: str, ts: str) -> IncidentView:
        """Remember the root message: everything about the incident threads under it."""
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            incident.channel_id = channel_id
            incident.thread_ts = ts
            session.add(incident)
            return self._view(session, incident)

    # --- lifecycle -----------------------------------------------------------------------------

    def set_status(self, *, incident_key: str, status: str, actor: str) -> IncidentView:
        """Move the incident along investigating -> ... -> resolved."""
        wanted = status.strip().lower()
        if wanted not in STATUSES:
            raise IncidentError(f"`{wanted[:30]}` is not a status. Use one of: {', '.join(STATUSES)}.")
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            if incident.status == "resolved":
                raise IncidentError(
                    f"{incident.key} is already resolved; open a new one with `/triage job {incident.target}`."
                )
            verb = "resolve" if wanted == "resolved" else "change the status of"
            self._require_command(session, incident, actor=actor, action=verb)
            previous = incident.status
            if previous == wanted:
                raise IncidentError(f"{incident.key} is already {wanted}.")
            now = self.clock()
            incident.status = wanted
            incident.updated_at = now
            if wanted == "resolved":
                incident.resolved_at = now
            session.add(incident)
            self._entry(
                session,
                incident,
                actor=actor,
                kind="status",
                text=f"Status {previous} -> {wanted}",
                data={"from": previous, "to": wanted},
            )
            return self._view(session, incident)

    def set_severity(self, *, incident_key: str, severity: str, actor: str) -> IncidentView:
        """Change the severity by hand (it sets the update-reminder interval)."""
        wanted = severity.strip().lower()
        if wanted not in SEVERITIES:
            raise IncidentError(f"`{wanted[:20]}` is not a severity. Use one of: {', '.join(SEVERITIES)}.")
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            self._require_command(session, incident, actor=actor, action="change the severity of")
            previous = incident.severity or "unknown"
            incident.severity = wanted
            incident.updated_at = self.clock()
            session.add(incident)
            self._entry(
                session,
                incident,
                actor=actor,
                kind="severity",
                text=f"Severity {previous} -> {wanted}",
                data={"from": previous, "to": wanted},
            )
            return self._view(session, incident)

    def reopen(self, *, incident_key: str, actor: str) -> IncidentView:
        """Bring a resolved incident back to investigating, unless its workload has another open one."""
        try:
            with session_scope(self.engine) as session:
                incident = self._get(session, incident_key)
                if incident.status != "resolved":
                    raise IncidentError(f"{incident.key} is {incident.status}, not resolved; nothing to reopen.")
                self._require_command(session, incident, actor=actor, action="reopen")
                incident.status = "investigating"
                incident.resolved_at = None
                incident.updated_at = self.clock()
                session.add(incident)
                self._entry(
                    session,
                    incident,
                    actor=actor,
                    kind="status",
                    text="Status resolved -> investigating (reopened)",
                    data={"from": "resolved", "to": "investigating"},
                )
        except IntegrityError:
            raise IncidentError(
                f"{incident_key} cannot be reopened: its workload already has another open incident."
            ) from None
        return self.get(incident_key=incident_key)

    def assign(self, *, incident_key: str, user_id: str, role: str, actor: str) -> IncidentView:
        """Give `user_id` a role; single-holder roles (commander, scribe, owner:<layer>) move."""
        normalised = rulebook.parse_role(text=role)
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            self._require_open(incident)
            self.policy.require_assign(
                actor=actor,
                commanders=self._commanders(session, incident),
                user_id=user_id,
                role=normalised,
                incident_key=incident.key,
            )
            self._grant(session, incident, role=normalised, user_id=user_id, actor=actor)
            incident.updated_at = self.clock()
            session.add(incident)
            return self._view(session, incident)

    def add_note(self, *, incident_key: str, text: str, actor: str) -> TimelineItem:
        """Add a free-text note to the timeline (control, bidi and invisible characters shown as `?`)."""
        body = printable(text).strip()
        if not body:
            raise IncidentError("The note is empty. Type `/triage note <what you saw or did>`.")
        if len(body) > MAX_NOTE_CHARS:
            raise IncidentError(f"Notes are at most {MAX_NOTE_CHARS} characters; this one is {len(body)}.")
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            entry = self._entry(session, incident, actor=actor, kind="note", text=body)
            incident.updated_at = entry.at
            session.add(incident)
            return _timeline_item(entry)

    def add_timeline_entry(
        self, *, incident_key: str, actor: str, kind: str, text: str, data: dict[str, Any] | None = None
    ) -> TimelineItem:
        """For other areas (changes, handoffs, reminders): one entry, in its own transaction."""
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            return _timeline_item(
                self._entry(session, incident, actor=actor, kind=kind, text=text, data=data)
            )

    # --- snapshots -----------------------------------------------------------------------------

    def run_snapshot(self, *, incident_key: str, settings: Settings, actor: str) -> SnapshotReport:
        """Ask the diagnoser about the incident's workload and store what it says; `actor` is who asked
        (a person, or the bot for alert intake), checked against the allow-list whatever the path."""
        if self.diagnoser is None:
            raise IncidentError("No diagnoser is configured, so no snapshot can be taken.")
        self.policy.require_cluster_read(actor=actor)
        incident = self.get(incident_key=incident_key)
        # Marked as running first, so a restart can tell the snapshot was interrupted.
        self.add_timeline_entry(
            incident_key=incident_key,
            actor=actor,
            kind=SNAPSHOT_STARTED,
            text=f"Snapshot of `{incident.target}` started",
            data={"instance": settings.instance_id, "boot": self.boot_id},
        )
        # Redacted before it is stored or posted: the caller posts exactly what we return.
        report = redact.redact_report(self._diagnose(target=self.snapshot_target(incident), settings=settings))
        self.record_snapshot(incident_key=incident_key, report=report, actor=actor)
        return report

    def snapshot_of(self, *, target: Target, settings: Settings, actor: str) -> SnapshotReport:
        """A bounded, redacted snapshot of another workload (a healthy sibling to compare), not stored."""
        if self.diagnoser is None:
            raise IncidentError("No diagnoser is configured, so no snapshot can be taken.")
        self.policy.require_cluster_read(actor=actor, what="take snapshots (a comparison takes one)")
        return redact.redact_report(self._diagnose(target=target, settings=settings))

    def _diagnose(self, *, target: Target, settings: Settings) -> SnapshotReport:
        """The diagnoser, inside one of the target's cluster's snapshot slots: a slow cluster queues its own
        snapshots (bounded; ClusterBusy past that) and never holds another cluster's."""
        if self.diagnoser is None:
            raise IncidentError("No diagnoser is configured, so no snapshot can be taken.")
        if self.clusters is None:
            return self.diagnoser(target=target, settings=settings)
        spec = self.clusters.spec_for(target)
        wait = spec.bounds_over(settings.bounds).deadline_seconds
        with self.clusters.gate(spec.name).hold(wait_seconds=wait):
            return self.diagnoser(target=target, settings=settings)

    def record_snapshot(self, *, incident_key: str, report: SnapshotReport, actor: str = BOT_ACTOR) -> None:
        """Store the report JSON (observations included), its verdict and a timeline entry."""
        payload = redact.redact_report(report).to_dict(include_observations=True)
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            layer = report.verdict.layer.value if report.verdict.layer else None
            session.add(
                Snapshot(
                    incident_id=_row_id(incident),
                    taken_at=report.taken_at,
                    target=report.target,
                    verdict_layer=layer,
                    report=payload,
                )
            )
            incident.severity = worst_severity(report) or incident.severity
            incident.verdict_layer = layer
            incident.updated_at = self.clock()
            session.add(incident)
            summary = (
                f"Snapshot: {len(report.findings)} finding(s); verdict {layer or 'undetermined'} "
                f"({report.verdict.confidence:.0%}): {report.verdict.summary}"
            )
            self._entry(
                session,
                incident,
                actor=actor,
                kind="snapshot",
                text=summary[:4000],
                data={
                    "verdict_layer": layer,
                    "findings": len(report.findings),
                    "elapsed_ms": report.elapsed_ms,
                },
            )

    def recover_interrupted_snapshots(self, *, instance_id: str, stale_after: timedelta) -> list[str]:
        """At startup: snapshots that were running when this instance last stopped (or that no
        replica finished within `stale_after`) are marked interrupted on their incident's timeline."""
        now = self.clock()

        def abandoned(started: Any) -> bool:
            data = started.data or {}
            restarted = data.get("instance") == instance_id and data.get("boot") != self.boot_id
            return restarted or now - started.at >= stale_after  # else another replica may still be taking it

        return self._mark_interrupted(abandoned)

    def interrupt_running_snapshots(self, *, instance_id: str) -> list[str]:
        """At shutdown, after the grace period: snapshots this very process is still taking are marked
        interrupted now, so nothing is left looking like it is running."""

        def ours(started: Any) -> bool:
            data = started.data or {}
            return data.get("instance") == instance_id and data.get("boot") == self.boot_id

        return self._mark_interrupted(ours)

    def _mark_interrupted(self, should_mark: Callable[[Any], bool]) -> list[str]:
        """Open incidents whose last snapshot entry is a start that `should_mark` accepts get an
        interrupted entry; returns their keys."""
        interrupted: list[str] = []
        with session_scope(self.engine) as session:
            for incident in incident_repo.all_open(session):
                entries = incident_repo.timeline(session, incident_id=incident.id)
                last = next((item for item in reversed(entries) if item.kind in SNAPSHOT_KINDS), None)
                if last is None or last.kind != SNAPSHOT_STARTED or not should_mark(last):
                    continue
                self._entry(
                    session,
                    incident,
                    actor=BOT_ACTOR,
                    kind=SNAPSHOT_INTERRUPTED,
                    text=(
                        f"Snapshot interrupted: the bot stopped while taking it (started "
                        f"{last.at:%H:%M:%S} UTC); its findings were not saved."
                    ),
                    data={"started_at": last.at.isoformat()},
                )
                interrupted.append(incident.key or "")
        return interrupted

    def snapshots(self, *, incident_key: str) -> list[dict[str, Any]]:
        """Stored snapshot reports (the stable JSON), oldest first."""
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            return [
                dict(row.report) for row in incident_repo.snapshots(session, incident_id=_row_id(incident))
            ]

    # --- reading -------------------------------------------------------------------------------

    def get(self, *, incident_key: str) -> IncidentView:
        """One incident by key."""
        with session_scope(self.engine) as session:
            return self._view(session, self._get(session, incident_key))

    def open_in_channel(self, *, channel_id: str) -> IncidentView:
        """The channel's open incident; asks for a key when there are several."""
        with session_scope(self.engine) as session:
            rows = incident_repo.open_in_channel(session, channel_id=channel_id)
            if not rows:
                raise IncidentNotFound(
                    "There is no open incident in this channel. Open one with `/triage job <id>`, "
                    "or name one: `/triage <subcommand> INC-0042 ...`."
                )
            if len(rows) > 1:
                keys = ", ".join(row.key for row in rows[:10])
                raise IncidentError(
                    f"This channel has {len(rows)} open incidents ({keys}). Name one, e.g. "
                    f"`/triage status {rows[0].key} mitigated`."
                )
            return self._view(session, rows[0])

    def latest(self) -> IncidentView | None:
        """The most recently opened incident, open or not."""
        with session_scope(self.engine) as session:
            row = incident_repo.latest(session)
            return None if row is None else self._view(session, row)

    def list_open(self) -> list[IncidentView]:
        """Every open incident, oldest first."""
        with session_scope(self.engine) as session:
            return [self._view(session, row) for row in incident_repo.all_open(session)]

    def open_count_by_severity(self) -> dict[str, int]:
        """For the metrics gauge."""
        with session_scope(self.engine) as session:
            return incident_repo.open_count_by_severity(session)

    def timeline(self, incident_key: str) -> list[TimelineItem]:
        """The timeline in the order it happened."""
        with session_scope(self.engine) as session:
            incident = self._get(session, incident_key)
            return [
                _timeline_item(row) for row in incident_repo.timeline(session, incident_id=_row_id(incident))
            ]

    # --- exactly-once --------------------------------------------------------------------------

    def prune_processed_requests(self, *, older_than: datetime) -> int:
        """Forget request fingerprints older than Slack's retry window (scheduled housekeeping)."""
        with session_scope(self.engine) as session:
            return incident_repo.delete_processed_before(session, cutoff=older_than)

    def claim_request(self, *, fingerprint: str, kind: str) -> bool:
        """True the first time a request fingerprint is seen, by any replica; False for repeats."""
        try:
            with session_scope(self.engine) as session:
                session.add(
                    ProcessedRequest(fingerprint=fingerprint[:128], kind=kind[:64], processed_at=self.clock())
                )
            return True
        except IntegrityError:
            return False

    # --- internals -----------------------------------------------------------------------------

    def _get(self, session: Any, key: str) -> Incident:
        incident = incident_repo.by_key(session, key=key.strip().upper())
        if incident is None:
            raise IncidentNotFound(f"There is no incident {key[:20]}. `/triage list` shows the open ones.")
        return incident

    @staticmethod
    def _commanders(session: Any, incident: Incident) -> list[str]:
        return [
            item.user_id
            for item in incident_repo.active_roles(session, incident_id=_row_id(incident))
            if item.role == rulebook.COMMANDER
        ]

    def _require_command(self, session: Any, incident: Incident, *, actor: str, action: str) -> None:
        """Commander-or-admin actions, by the one rulebook."""
        self.policy.require_command(
            actor=actor, commanders=self._commanders(session, incident), action=action, incident_key=incident.key
        )

    @staticmethod
    def _require_open(incident: Incident) -> None:
        if incident.status == "resolved":
            raise IncidentError(f"{incident.key} is resolved; it no longer takes assignments.")

    def _entry(
        self,
        session: Any,
        incident: Incident,
        *,
        actor: str,
        kind: str,
        text: str,
        data: dict[str, Any] | None = None,
    ) -> TimelineEntry:
        entry = TimelineEntry(
            incident_id=_row_id(incident), at=self.clock(), actor=actor, kind=kind, text=text, data=data or {}
        )
        session.add(entry)
        return entry

    def _grant(self, session: Any, incident: Incident, *, role: str, user_id: str, actor: str) -> None:
        current = incident_repo.active_roles(session, incident_id=_row_id(incident))
        if any(item.role == role and item.user_id == user_id for item in current):
            raise IncidentError(f"<@{user_id}> is already {role} of {incident.key}.")
        replaced = []
        if role not in MULTI_HOLDER_ROLES:
            for item in current:
                if item.role == role:
                    item.active = False
                    session.add(item)
                    replaced.append(item.user_id)
        session.add(
            RoleAssignment(
                incident_id=_row_id(incident),
                role=role,
                user_id=user_id,
                assigned_by=actor,
                assigned_at=self.clock(),
            )
        )
        text = f"<@{user_id}> is {role}" + (f" (was <@{replaced[0]}>)" if replaced else "")
        self._entry(
            session,
            incident,
            actor=actor,
            kind="assign",
            text=text,
            data={"role": role, "user_id": user_id, "replaced": replaced},
        )
        session.flush()

    @staticmethod
    def _view(session: Any, incident: Incident) -> IncidentView:
        roles = tuple(
            RoleView(role=item.role, user_id=item.user_id)
            for item in incident_repo.active_roles(session, incident_id=_row_id(incident))
        )
        return IncidentView(
            key=incident.key,
            title=incident.title,
            target=incident.target,
            workload_key=incident.workload_key,
            status=incident.status,
            severity=incident.severity,
            verdict_layer=incident.verdict_layer,
            channel_id=incident.channel_id,
            thread_ts=incident.thread_ts,
            opened_by=incident.opened_by,
            opened_at=incident.opened_at,
            updated_at=incident.updated_at,
            resolved_at=incident.resolved_at,
            roles=roles,
            cluster=incident.cluster,
        )


def _timeline_item(entry: TimelineEntry) -> TimelineItem:
    return TimelineItem(
        at=entry.at, actor=entry.actor, kind=entry.kind, text=entry.text, data=dict(entry.data or {})
    )


def _row_id(row: Incident) -> int:
    """The primary key of a row that was flushed (always true inside these methods)."""
    if row.id is None:
        raise RuntimeError("incident row was not flushed")
    return row.id
