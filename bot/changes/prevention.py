"""Prevention actions: each guardrail has an owner, a due date and a check that proves it holds."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import date, datetime

from bot.changes.service import ChangeError
from bot.evidence.findings import utcnow
from storage.db import Engine, session_scope
from storage.repositories import prevention as prevention_repo
from storage.tables import records as tables

OPEN = "open"
DONE = "done"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreventionView:
    """One prevention action as plain data."""

    id: int
    incident_key: str
    description: str
    owner: str
    due_on: date
    guardrail_check: str
    status: str
    created_at: datetime
    completed_at: datetime | None

    def overdue(self, *, today: date) -> bool:
        """Open and past its due date."""
        return self.status == OPEN and self.due_on < today


def prevention_view(*, row: tables.PreventionAction) -> PreventionView:
    """Plain data from a row."""
    assert row.id is not None and row.created_at is not None
    return PreventionView(
        id=row.id,
        incident_key=row.incident_key,
        description=row.description,
        owner=row.owner,
        due_on=row.due_on,
        guardrail_check=row.guardrail_check,
        status=row.status,
        created_at=row.created_at,
        completed_at=row.completed_at,
    )


_PREVENT_ARGS = re.compile(
    r"^\s*<@(?P<owner>[A-Z0-9]+)(?:\|[^>]*)?>\s+(?P<due>\d{4}-\d{2}-\d{2})\s+(?P<rest>.+)$", re.DOTALL
)


def parse_prevent_args(*, text: str) -> tuple[str, date, str, str]:
    """Read `@owner YYYY-MM-DD description | guardrail check` (owner as Slack escapes it)."""
    usage = "Usage: `/triage prevent @owner YYYY-MM-DD what to change | the check that proves it holds`"
    match = _PREVENT_ARGS.match(text or "")
    if not match:
        raise ChangeError(usage)
    try:
        due_on = date.fromisoformat(match.group("due"))
    except ValueError as error:
        raise ChangeError(f"{match.group('due')!r} is not a date. {usage}") from error
    description, separator, guardrail = match.group("rest").partition("|")
    if not separator or not guardrail.strip() or not description.strip():
        raise ChangeError(f"Both the action and its guardrail check are required. {usage}")
    return match.group("owner"), due_on, description.strip(), guardrail.strip()


class PreventionService:
    """Adds prevention actions and closes them."""

    def __init__(
        self,
        *,
        engine: Engine,
        clock: Callable[[], datetime] = utcnow,
        on_event: Callable[..., None] = lambda **_: None,
    ) -> None:
        """`on_event(session=, incident_key=, kind=, actor=, text=)` writes the timeline in the same transaction."""
        self._engine = engine
        self._clock = clock
        self._on_event = on_event

    def add(
        self,
        *,
        incident_key: str,
        description: str,
        owner: str,
        due_on: date,
        guardrail_check: str,
        actor: str,
    ) -> PreventionView:
        """Record one prevention action."""
        if not description.strip() or not guardrail_check.strip() or not owner.strip():
            raise ChangeError("A prevention action needs a description, an owner and a guardrail check.")
        row = tables.PreventionAction(
            incident_key=incident_key,
            description=description.strip()[:2000],
            owner=owner.strip(),
            due_on=due_on,
            guardrail_check=guardrail_check.strip()[:2000],
            status=OPEN,
            created_at=self._clock(),
        )
        with session_scope(self._engine) as session:
            prevention_repo.add(session, action=row)
            self._on_event(
                session=session,
                incident_key=incident_key,
                kind="prevention_added",
                actor=actor,
                text=f"Prevention #{row.id} for <@{row.owner}> due {row.due_on.isoformat()}: {row.description} "
                f"(guardrail: {row.guardrail_check})",
            )
            return prevention_view(row=row)

    def complete(self, *, action_id: int, actor: str) -> PreventionView:
        """Close an action once its guardrail check passes."""
        with session_scope(self._engine) as session:
            row = prevention_repo.get(session, action_id=action_id)
            if row is None:
                raise ChangeError(f"There is no prevention action #{action_id}.")
            row.status = DONE
            row.completed_at = self._clock()
            prevention_repo.save(session, action=row)
            self._on_event(
                session=session,
                incident_key=row.incident_key,
                kind="prevention_done",
                actor=actor,
                text=f"Prevention #{row.id} done: {row.description}",
            )
            return prevention_view(row=row)

    def for_incident(self, *, incident_key: str) -> tuple[PreventionView, ...]:
        """Every action of an incident, oldest first."""
        with session_scope(self._engine) as session:
            rows = prevention_repo.for_incident(session, incident_key=incident_key)
            return tuple(prevention_view(row=row) for row in rows)

    def overdue(self, *, today: date) -> tuple[PreventionView, ...]:
        """Open actions past their due date, across incidents."""
        with session_scope(self._engine) as session:
            rows = prevention_repo.overdue(session, status=OPEN, today=today)
            return tuple(prevention_view(row=row) for row in rows)
