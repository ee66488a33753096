"""Adapters from the incident record to the records area: loading IncidentData, the timeline sink,
the incident directory and the revalidator that scheduled tasks use."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.changes.prevention import PreventionService
from bot.changes.service import ChangeService
from bot.config import Settings
from bot.evidence import findings
from bot.incidents.service import IncidentError, IncidentService, IncidentView
from bot.records.build import IncidentData, RoleEntry, TimelineItem
from bot.schedule.store import TaskStore
from bot.schedule.tasks import IncidentThread, Revalidation, RevalidationUnavailable, TaskKind
from storage.db import Engine, Session, session_scope
from storage.repositories import incidents as incident_repo
from storage.tables.incidents import Incident


def timeline_sink(*, clock: Callable[[], datetime] = findings.utcnow) -> Callable[..., None]:
    """An `on_event` for ChangeService/PreventionService: one timeline entry in the caller's transaction."""

    def write(*, session: Session, incident_key: str, kind: str, actor: str, text: str) -> None:
        incident = incident_repo.by_key(session, key=incident_key)
        if incident is None:
            raise IncidentError(f"There is no incident {incident_key[:20]}.")
        incident_repo.append_timeline(
            session,
            incident_id=_stored_id(incident),
            at=clock(),
            actor=actor,
            kind=kind[:32],
            text=text[:4000],
            data={},
        )

    return write


def load_incident_data(
    *,
    engine: Engine,
    incident_key: str,
    changes: ChangeService,
    prevention: PreventionService,
    tasks: TaskStore,
) -> IncidentData:
    """Everything the handoff and postmortem draw on, read from the database."""
    with session_scope(engine) as session:
        incident = incident_repo.by_key(session, key=incident_key.strip().upper())
        if incident is None:
            raise IncidentError(
                f"There is no incident {incident_key[:20]}. `triage-bot` lists none by that key."
            )
        incident_id = _stored_id(incident)
        roles = incident_repo.active_roles(session, incident_id=incident_id)
        data = IncidentData(
            key=incident.key or "",
            title=incident.title,
            target=incident.target,
            severity=incident.severity or "unknown",
            status=incident.status,
            opened_at=incident.opened_at,
            opened_by=incident.opened_by,
            channel=incident.channel_id,
            cluster=incident.cluster,
            resolved_at=incident.resolved_at,
            roles=tuple(
                RoleEntry(role=row.role, user=row.user_id, assigned_at=row.assigned_at) for row in roles
            ),
            timeline=tuple(
                TimelineItem(at=row.at, kind=row.kind, actor=row.actor, text=row.text)
                for row in incident_repo.timeline(session, incident_id=incident_id)
            ),
            snapshots=tuple(
                dict(row.report) for row in incident_repo.snapshots(session, incident_id=incident_id)
            ),
        )
    validations: list[dict[str, Any]] = []
    for job in tasks.tasks(incident_key=data.key, kind=TaskKind.VALIDATION_WINDOW):
        if job.done_at is not None and job.result:
            validations.append(dict(job.result))
        elif job.done_at is None:
            validations.append(
                {**job.payload, "pending": True, "due_at": job.due_at.isoformat() if job.due_at else ""}
            )
    return dataclasses.replace(
        data,
        changes=changes.for_incident(incident_key=data.key),
        prevention=prevention.for_incident(incident_key=data.key),
        validations=tuple(validations),
    )


def _stored_id(incident: Incident) -> int:
    """A row read from the database always has its id."""
    if incident.id is None:
        raise IncidentError(f"{incident.key} has not been stored yet.")
    return incident.id


def thread_of(view: IncidentView) -> IncidentThread:
    """The job-facing summary of an incident."""
    owners = view.holders("owner") + tuple(
        item.user_id for item in view.roles if item.role.startswith("owner:")
    )
    commanders = view.holders("commander")
    return IncidentThread(
        key=view.key,
        channel=view.channel_id,
        thread_ts=view.thread_ts or "",
        severity=view.severity or "unknown",
        status=view.status,
        owner=owners[0] if owners else None,
        commander=commanders[0] if commanders else None,
        last_update_at=view.updated_at,
        unowned_layer=view.verdict_layer
        if view.verdict_layer and not view.holders(f"owner:{view.verdict_layer}")
        else None,
    )


class ServiceDirectory:
    """IncidentDirectory over the incident service."""

    def __init__(self, *, incidents: IncidentService) -> None:
        """Reads only."""
        self._incidents = incidents

    def thread(self, *, incident_key: str) -> IncidentThread | None:
        """None when the incident is gone."""
        try:
            return thread_of(self._incidents.get(incident_key=incident_key))
        except IncidentError:
            return None


class SnapshotRevalidator:
    """Re-runs the incident's snapshot through the configured diagnoser and compares finding rules."""

    def __init__(self, *, incidents: IncidentService, settings: Settings) -> None:
        """The diagnoser is the incident service's own."""
        self._incidents = incidents
        self._settings = settings

    def revalidate(self, *, incident_key: str, requested_by: str) -> Revalidation:
        """Original rules from the first stored snapshot; current ones from a fresh, stored snapshot taken
        on behalf of `requested_by` (the rulebook applies to scheduled reads as to typed ones)."""
        if self._incidents.diagnoser is None:
            raise RevalidationUnavailable("no cluster is configured for this bot")
        if not self._incidents.policy.may_read_cluster(requested_by):
            raise RevalidationUnavailable(
                f"<@{requested_by}>, who applied the change, is not on the snapshot allow-list"
            )
        stored = self._incidents.snapshots(incident_key=incident_key)
        original = frozenset(item["rule"] for item in (stored[0].get("findings", ()) if stored else ()))
        report = self._incidents.run_snapshot(
            incident_key=incident_key, settings=self._settings, actor=requested_by
        )
        return Revalidation(
            original_rules=original,
            current_rules=frozenset(finding.rule for finding in report.findings),
            taken_at=report.taken_at,
            target=report.target,
        )
