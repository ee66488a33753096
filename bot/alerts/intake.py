"""Alert intake: record every alert, open or link one incident per target, follow alerts to resolution.

One notification is processed at a time (the edge's worker feeds it from a bounded queue):
1. every alert is recorded (Alertmanager's fingerprint + startsAt is its identity, so repeated notifications
   of a group update rows and never duplicate them);
2. firing alerts whose rule opens incidents, and that no incident holds yet, are mapped to a target (labels,
   or a pod's owner read by the bot) and grouped by target: a storm of hundreds of alerts for the pods of
   one job is one group, which opens one incident or links the one already open (a storm guard caps new
   incidents per window);
3. alerts that resolved are written on their incident's timeline; when none of an incident's alerts fires
   any more, the timeline says so and the edge suggests resolving.

The result says what the edge must post; nothing here knows Slack.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from bot.alerts.payload import Alert, Notification
from bot.alerts.routing import Decision, RoutingRules, decide
from bot.alerts.subjects import PodRef, Subject, subject_of
from bot.evidence import findings
from bot.evidence.targets import Target
from bot.incidents.policy import BOT_ACTOR
from bot.incidents.service import IncidentService, IncidentView
from storage.db import Engine, IntegrityError, session_scope
from storage.repositories import alerts as alert_repo
from storage.repositories import incidents as incident_repo
from storage.tables.alerts import ReceivedAlert

PodResolver = Callable[[PodRef], Subject]
MAX_NAMES_IN_TEXT = 10


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlertView:
    """One alert as the edge renders it."""

    fingerprint: str
    name: str
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None
    generator_url: str

    @classmethod
    def of(cls, alert: Alert) -> AlertView:
        """From the validated payload."""
        return cls(fingerprint=alert.identity, name=alert.name, status=alert.status, labels=dict(alert.labels),
                   annotations=dict(alert.annotations), starts_at=alert.startsAt, ends_at=alert.ended_at,
                   generator_url=alert.generatorURL)

    @property
    def summary(self) -> str:
        """The alert's own one-line summary (`summary`, else `message`, else `description`)."""
        for name in ("summary", "message", "description"):
            if self.annotations.get(name):
                return " ".join(self.annotations[name].split())
        return ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Opened:
    """A new incident from alerts: the edge posts its root message and takes the snapshot."""

    incident: IncidentView
    alerts: tuple[AlertView, ...]
    rule: str
    external_url: str
    receiver: str
    gpu: dict[str, str]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Linked:
    """Firing alerts joined an incident already open (a storm, or someone triaged it first)."""

    incident: IncidentView
    alerts: tuple[AlertView, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resolved:
    """Alerts of an incident resolved; `all_resolved` when none of its alerts fires any more."""

    incident: IncidentView
    alerts: tuple[AlertView, ...]
    all_resolved: bool
    total: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class IntakeResult:
    """What one notification did."""

    alerts: int
    opened: tuple[Opened, ...] = ()
    linked: tuple[Linked, ...] = ()
    resolved: tuple[Resolved, ...] = ()
    recorded: int = 0
    unmapped: int = 0
    held: int = 0
    repeated: int = 0


class StormGuard:
    """At most `limit` new incidents per `window_seconds` from alerts (a sliding window, this process)."""

    def __init__(self, *, limit: int, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._window = window_seconds
        self._clock = clock
        self._opened: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """Whether another incident may open now."""
        with self._lock:
            now = self._clock()
            while self._opened and now - self._opened[0] >= self._window:
                self._opened.popleft()
            return len(self._opened) < self._limit

    def took(self) -> None:
        """Count one incident opened."""
        with self._lock:
            self._opened.append(self._clock())


@dataclasses.dataclass(kw_only=True)
class _Seen:
    """One alert of the notification with its decision and what the database said about it."""

    alert: Alert
    decision: Decision
    row_id: int
    incident_key: str | None
    was: str | None  # status before this notification (None: first time seen)


@dataclasses.dataclass(kw_only=True)
class _Group:
    target: Target
    decision: Decision
    subject: Subject
    seen: list[_Seen] = dataclasses.field(default_factory=list)


class AlertIntake:
    """Turns validated notifications into records, incidents and timeline entries."""

    def __init__(self, *, engine: Engine, incidents: IncidentService, rules: RoutingRules,
                 resolve_pod: PodResolver | None = None, clock: Callable[[], datetime] = findings.utcnow) -> None:
        self.engine = engine
        self.incidents = incidents
        self.rules = rules
        self.resolve_pod = resolve_pod
        self.clock = clock
        self.guard = StormGuard(limit=rules.storm_guard.max_new_incidents,
                                window_seconds=rules.storm_guard.window_minutes * 60)

    def process(self, notification: Notification) -> IntakeResult:
        """Record, open or link, follow resolution; returns what the edge must post."""
        seen = self._record(notification)
        groups, unmapped = self._groups(seen)
        opened, linked, held = self._open_or_link(groups, notification=notification)
        resolved = self._resolutions(seen)
        recorded = sum(1 for item in seen if not item.decision.opens)
        repeated = sum(1 for item in seen if item.was == item.alert.status)
        return IntakeResult(alerts=len(seen), opened=tuple(opened), linked=tuple(linked), resolved=tuple(resolved),
                            recorded=recorded, unmapped=unmapped, held=held, repeated=repeated)

    # --- 1. record -------------------------------------------------------------------------------

    def _record(self, notification: Notification) -> list[_Seen]:
        for attempt in range(3):
            try:
                return self._record_once(notification)
            except IntegrityError:  # another replica recorded the same alert between our read and insert
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _record_once(self, notification: Notification) -> list[_Seen]:
        now = self.clock()
        with session_scope(self.engine) as session:
            existing = {(row.fingerprint, row.starts_at): row for row in alert_repo.with_fingerprints(
                session, fingerprints=[alert.identity for alert in notification.alerts])}
            pending: list[tuple[Alert, Decision, ReceivedAlert, str | None]] = []
            for alert in notification.alerts:
                decision = decide(self.rules, alert.labels)
                row = existing.get((alert.identity, alert.startsAt))
                if row is None and alert.status == "resolved":
                    row = _firing_of(existing.values(), fingerprint=alert.identity)
                was = None if row is None else row.status
                if row is None:
                    row = ReceivedAlert(
                        fingerprint=alert.identity, starts_at=alert.startsAt, alertname=alert.name[:200],
                        status=alert.status, labels=dict(alert.labels), annotations=dict(alert.annotations),
                        ends_at=alert.ended_at, generator_url=alert.generatorURL, external_url=notification.externalURL,
                        receiver=notification.receiver, group_key=notification.groupKey, rule=decision.rule[:64],
                        action="open" if decision.opens else "record", first_received_at=now, last_received_at=now,
                        notifications=1)
                    existing[(alert.identity, alert.startsAt)] = row
                elif (row.status, row.ends_at) != (alert.status, alert.ended_at) or row.annotations != alert.annotations:
                    row.status, row.ends_at, row.annotations = alert.status, alert.ended_at, dict(alert.annotations)
                pending.append((alert, decision, row, was))
            session.add_all([row for _, _, row, _ in pending])
            session.flush()  # one batched INSERT for the new rows
            seen = [_Seen(alert=alert, decision=decision, row_id=int(row.id or 0), incident_key=row.incident_key,
                          was=was) for alert, decision, row, was in pending]
            alert_repo.count_repeat(session, ids=[item.row_id for item in seen if item.was is not None], at=now)
        return seen

    # --- 2. open or link -------------------------------------------------------------------------

    def _subject(self, alert: Alert, decision: Decision) -> Subject:
        subject = subject_of(alert.labels, prefer=decision.target, node_platform=decision.node_platform)
        if subject.pod is not None:
            if self.resolve_pod is None:
                return Subject(reason=f"only a pod is named ({subject.pod.namespace}/{subject.pod.pod}) and no "
                                      "cluster is configured to read its owner")
            return self.resolve_pod(subject.pod)
        return subject

    def _groups(self, seen: Sequence[_Seen]) -> tuple[dict[str, _Group], int]:
        groups: dict[str, _Group] = {}
        notes: dict[int, str] = {}
        for item in seen:
            if item.alert.status != "firing" or not item.decision.opens or item.incident_key is not None:
                continue
            subject = self._subject(item.alert, item.decision)
            if subject.target is None:
                notes[item.row_id] = subject.reason or "no target"
                continue
            group = groups.setdefault(subject.target.workload_key,
                                      _Group(target=subject.target, decision=item.decision, subject=subject))
            group.seen.append(item)
        if notes:
            with session_scope(self.engine) as session:
                for row_id, note in notes.items():
                    alert_repo.mark(session, ids=[row_id], action="unmapped", note=note, incident_key=None,
                                    target=None)
        return groups, len(notes)

    def _open_or_link(self, groups: dict[str, _Group], *,
                      notification: Notification) -> tuple[list[Opened], list[Linked], int]:
        opened: list[Opened] = []
        linked: list[Linked] = []
        held = 0
        for key, group in groups.items():
            views = tuple(AlertView.of(item.alert) for item in group.seen)
            current = self._open_incident(workload_key=key)
            if current is None and not self.guard.allow():
                held += len(group.seen)
                self._mark(group.seen, action="held", note=(
                    f"storm guard: {self.rules.storm_guard.max_new_incidents} incidents opened from alerts in the "
                    f"last {self.rules.storm_guard.window_minutes:g} min; recorded, not opened"), incident_key=None,
                    target=group.target.key)
                continue
            if current is None:
                result = self.incidents.open_for_target(
                    target=group.target, channel_id=group.decision.channel or "", opened_by=BOT_ACTOR,
                    title=alert_title(views[0], target=group.target.key, external_url=notification.externalURL,
                                      count=len(views)),
                    severity=group.decision.severity)
                current, created = result.incident, result.created
            else:
                created = False
            self._mark(group.seen, action="open", note="", incident_key=current.key, target=group.target.key)
            names = _names(views)
            if created:
                self.guard.took()
                self.incidents.add_timeline_entry(
                    incident_key=current.key, actor=BOT_ACTOR, kind="alert",
                    text=f"Opened from alert(s) {names} (rule `{group.decision.rule}`, receiver "
                         f"`{_plain(notification.receiver)}`)"[:4000],
                    data={"fingerprints": [view.fingerprint for view in views[:200]], "rule": group.decision.rule,
                          "alerts": len(views)})
                opened.append(Opened(incident=current, alerts=views, rule=group.decision.rule,
                                     external_url=notification.externalURL, receiver=notification.receiver,
                                     gpu=group.subject.gpu))
            else:
                self.incidents.add_timeline_entry(
                    incident_key=current.key, actor=BOT_ACTOR, kind="alert",
                    text=f"{len(views)} firing alert(s) linked: {names}"[:4000],
                    data={"fingerprints": [view.fingerprint for view in views[:200]], "alerts": len(views)})
                linked.append(Linked(incident=current, alerts=views))
        return opened, linked, held

    def _open_incident(self, *, workload_key: str) -> IncidentView | None:
        with session_scope(self.engine) as session:
            row = incident_repo.open_for_workload(session, workload_key=workload_key)
            key = None if row is None else row.key
        return None if key is None else self.incidents.get(incident_key=key)

    def _mark(self, seen: Sequence[_Seen], *, action: str, note: str, incident_key: str | None, target: str) -> None:
        with session_scope(self.engine) as session:
            alert_repo.mark(session, ids=[item.row_id for item in seen], action=action, note=note,
                            incident_key=incident_key, target=target)
        for item in seen:
            item.incident_key = incident_key

    # --- 3. resolution ---------------------------------------------------------------------------

    def _resolutions(self, seen: Sequence[_Seen]) -> list[Resolved]:
        by_incident: dict[str, list[AlertView]] = {}
        for item in seen:
            if item.alert.status == "resolved" and item.was == "firing" and item.incident_key:
                by_incident.setdefault(item.incident_key, []).append(AlertView.of(item.alert))
        resolved = []
        for key, views in by_incident.items():
            ended = max((view.ends_at for view in views if view.ends_at), default=None)
            self.incidents.add_timeline_entry(
                incident_key=key, actor=BOT_ACTOR, kind="alert_resolved",
                text=f"Alert(s) resolved: {_names(views)}" + (f" (ended {findings._plain(ended)})" if ended else ""),
                data={"fingerprints": [view.fingerprint for view in views[:200]], "alerts": len(views)})
            with session_scope(self.engine) as session:
                firing = alert_repo.firing_count(session, incident_key=key)
                total = len(alert_repo.for_incident(session, incident_key=key))
            incident = self.incidents.get(incident_key=key)
            everything = firing == 0 and incident.is_open
            if everything:
                self.incidents.add_timeline_entry(
                    incident_key=key, actor=BOT_ACTOR, kind="alerts_all_resolved",
                    text=f"Every alert of {key} has resolved ({total}); resolve the incident once the failure no "
                         "longer reproduces", data={"alerts": total})
            resolved.append(Resolved(incident=incident, alerts=tuple(views), all_resolved=everything, total=total))
        return resolved


def _firing_of(rows: Iterable[ReceivedAlert], *, fingerprint: str) -> ReceivedAlert | None:
    """The firing this resolution ends when Alertmanager reports it with another startsAt (it does when the end
    it was given lies before the alert's start, or after it lost its state): the latest one of that label set."""
    candidates = [row for row in rows if row.fingerprint == fingerprint and row.status == "firing"
                  and row.starts_at is not None]
    return max(candidates, key=lambda row: row.starts_at, default=None)  # type: ignore[arg-type, return-value]


def _plain(text: str) -> str:
    """Alert text for the timeline: printable, bounded, without the characters that make links or mentions."""
    return "".join(ch if ch.isprintable() and ch not in "<>`&" else "?" for ch in text)[:120]


def _names(views: Sequence[AlertView]) -> str:
    counts = collections.Counter(_plain(view.name) for view in views)
    shown = ", ".join(f"`{name}`" + (f" ×{count}" if count > 1 else "") for name, count in
                      counts.most_common(MAX_NAMES_IN_TEXT))
    more = len(counts) - MAX_NAMES_IN_TEXT
    return shown + (f" and {more} more" if more > 0 else "")


def alertmanager_link(*, external_url: str, alert: AlertView) -> str:
    """A link back to the alert in Alertmanager's UI (filtered by its name), or '' without an externalURL."""
    if not external_url.startswith(("http://", "https://")):
        return ""
    query = urllib.parse.quote(f'{{alertname="{alert.name}"}}', safe="")
    return f"{external_url.rstrip('/')}/#/alerts?filter={query}"


def alert_title(alert: AlertView, *, target: str, external_url: str, count: int) -> str:
    """The incident's title: the alert, its severity and summary, and the way back to Alertmanager."""
    severity = alert.labels.get("severity")
    link = alertmanager_link(external_url=external_url, alert=alert) or alert.generator_url
    head = f"Alert {alert.name}" + (f" [{severity}]" if severity else "") + (f" ×{count}" if count > 1 else "")
    summary = alert.summary
    budget = 400 - len(head) - len(link) - 8
    if len(summary) > budget:
        summary = summary[: max(0, budget - 1)] + "…"
    parts = [head + (f": {summary}" if summary else f" on {target}")]
    if link and len(link) < 300:
        parts.append(link)
    return " · ".join(parts)[:400]


def describe(result: IntakeResult) -> dict[str, Any]:
    """Counts for logs and the response body."""
    return {"alerts": result.alerts, "opened": len(result.opened), "linked": len(result.linked),
            "resolved": sum(len(item.alerts) for item in result.resolved), "recorded": result.recorded,
            "unmapped": result.unmapped, "held": result.held, "repeated": result.repeated}
