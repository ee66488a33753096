"""Changes tuned one lever at a time, with rollback plans and measurements that must repeat."""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Sequence
from datetime import datetime

from bot.evidence.findings import utcnow
from storage.db import Engine, Session, session_scope
from storage.repositories import changes as change_repo
from storage.tables import records as tables

MIN_VALIDATION_WINDOWS = 2


class ChangeState(enum.StrEnum):
    """Where a change is in its life."""

    PROPOSED = "proposed"
    APPLIED = "applied"
    VALIDATED = "validated"
    ROLLED_BACK = "rolled_back"


UNVALIDATED = (ChangeState.PROPOSED, ChangeState.APPLIED)
_ALLOWED_FROM: dict[ChangeState, tuple[ChangeState, ...]] = {
    ChangeState.APPLIED: (ChangeState.PROPOSED,),
    ChangeState.VALIDATED: (ChangeState.APPLIED,),
    ChangeState.ROLLED_BACK: (ChangeState.PROPOSED, ChangeState.APPLIED, ChangeState.VALIDATED),
}


class ChangeError(ValueError):
    """A change request that cannot be honoured; the message says what to do instead."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeasurementView:
    """One measurement as plain data."""

    window: str
    metric: str
    value: float
    unit: str
    baseline: float
    threshold: float
    taken_at: datetime
    taken_by: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChangeView:
    """One change and its measurements as plain data, with the repeatability verdict."""

    id: int
    incident_key: str
    what: str
    variable: str
    expected_effect: str
    metric: str
    unit: str
    baseline: float | None
    threshold: float | None
    higher_is_better: bool
    rollback_plan: str
    approved_by: str
    proposed_by: str
    state: ChangeState
    proposed_at: datetime
    applied_at: datetime | None
    validated_at: datetime | None
    rolled_back_at: datetime | None
    measurements: tuple[MeasurementView, ...] = ()

    @property
    def gain_repeated(self) -> bool:
        """True when at least two windows each beat the baseline and reach the acceptance threshold."""
        return gain_repeated(measurements=self.measurements, higher_is_better=self.higher_is_better)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChangeOutcome:
    """The change after an action, plus a warning the caller must show (empty when none)."""

    change: ChangeView
    warning: str = ""


def window_shows_benefit(*, measurement: MeasurementView, higher_is_better: bool) -> bool:
    """One window beats its baseline and reaches the acceptance threshold."""
    if higher_is_better:
        return measurement.value > measurement.baseline and measurement.value >= measurement.threshold
    return measurement.value < measurement.baseline and measurement.value <= measurement.threshold


def gain_repeated(*, measurements: tuple[MeasurementView, ...], higher_is_better: bool) -> bool:
    """The seeds' repeatability rule: benefit in every window, and at least two windows."""
    windows = {item.window for item in measurements}
    if len(windows) < MIN_VALIDATION_WINDOWS:
        return False
    return all(
        window_shows_benefit(measurement=item, higher_is_better=higher_is_better) for item in measurements
    )


_MEASURE_PATTERN = re.compile(
    r"^\s*(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>\S.*)?$"
)


def parse_value_with_unit(*, text: str) -> tuple[float, str]:
    """Read `1450tok/s` or `12.5 ms` into a number and its unit; a unit is required."""
    match = _MEASURE_PATTERN.match(text)
    if not match or not match.group("unit"):
        raise ChangeError(
            f"Could not read {text!r} as a number with a unit: write it like `1450tok/s` or `12.5ms`."
        )
    value = float(match.group("value"))
    if not math.isfinite(value):
        raise ChangeError(f"{text!r} is not a finite number.")
    return value, match.group("unit").strip()


_TARGET_PATTERN = re.compile(
    r"^\s*(?P<baseline>[-+]?\d+(?:\.\d+)?)\s*->\s*(?P<threshold>[-+]?\d+(?:\.\d+)?)\s*(?P<unit>\S.*)$"
)
_BASELINE_PATTERN = re.compile(r"^\s*(?P<baseline>[-+]?\d+(?:\.\d+)?)\s*->\s*(?P<threshold>[-+]?\d+(?:\.\d+)?)\s*$")


def parse_baseline_and_threshold(*, text: str) -> tuple[float, float]:
    """`<baseline> -> <threshold>` (units as the measurement's): the acceptance target of a change."""
    match = _BASELINE_PATTERN.match(text)
    if match is None:
        raise ChangeError(f"Could not read {text.strip()[:40]!r} as `<baseline> -> <threshold>`, e.g. `400 -> 2000`.")
    return float(match.group("baseline")), float(match.group("threshold"))


CHANGE_TEXT_USAGE = (
    "`/triage change <variable> | <what changes> | <expected effect> | <metric> | <rollback plan> "
    "[| <baseline> -> <threshold> <unit>]`, or `/triage change` alone for the form"
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChangeDraft:
    """A change read from one line of text, ready for `ChangeService.propose(**dataclasses.asdict(draft))`."""

    variable: str
    what: str
    expected_effect: str
    metric: str
    rollback_plan: str
    unit: str = ""
    baseline: float | None = None
    threshold: float | None = None
    higher_is_better: bool = True


def parse_change_text(*, text: str) -> ChangeDraft:
    """The one-line form of a change; the rollback plan is required."""
    parts = [part.strip() for part in (text or "").split("|")]
    if len(parts) not in (5, 6) or not all(parts[:5]):
        raise ChangeError(f"Write the change as {CHANGE_TEXT_USAGE}. The rollback plan is required.")
    variable, what, expected_effect, metric, rollback_plan = parts[:5]
    draft = ChangeDraft(
        variable=variable,
        what=what,
        expected_effect=expected_effect,
        metric=metric,
        rollback_plan=rollback_plan,
    )
    if len(parts) == 5:
        return draft
    match = _TARGET_PATTERN.match(parts[5])
    if not match:
        raise ChangeError(f"Could not read {parts[5]!r}: write the target like `400 -> 2000 steps`.")
    baseline, threshold = float(match.group("baseline")), float(match.group("threshold"))
    return dataclasses.replace(
        draft,
        baseline=baseline,
        threshold=threshold,
        unit=match.group("unit").strip(),
        higher_is_better=threshold >= baseline,
    )


def _required(*, name: str, value: str, limit: int) -> str:
    cleaned = (value or "").strip()
    if not cleaned:
        raise ChangeError(f"The {name} is required.")
    if len(cleaned) > limit:
        raise ChangeError(f"The {name} is too long ({len(cleaned)} characters, at most {limit}).")
    return cleaned


EventSink = Callable[..., None]


def _no_event(**_: object) -> None:
    return None


class ChangeService:
    """Records changes and their measurements; every action is one transaction."""

    def __init__(
        self,
        *,
        engine: Engine,
        clock: Callable[[], datetime] = utcnow,
        on_event: EventSink = _no_event,
    ) -> None:
        """`on_event(session=, incident_key=, kind=, actor=, text=)` writes the timeline in the same transaction."""
        self._engine = engine
        self._clock = clock
        self._on_event = on_event

    def propose(
        self,
        *,
        incident_key: str,
        what: str,
        variable: str,
        expected_effect: str,
        metric: str,
        rollback_plan: str,
        approved_by: str,
        proposed_by: str,
        unit: str = "",
        baseline: float | None = None,
        threshold: float | None = None,
        higher_is_better: bool = True,
    ) -> ChangeOutcome:
        """Record a proposed change; warn when another change is still unvalidated."""
        row = tables.Change(
            incident_key=incident_key,
            what=_required(name="description of what changes", value=what, limit=2000),
            variable=_required(name="single variable tuned", value=variable, limit=300),
            expected_effect=_required(name="expected effect", value=expected_effect, limit=2000),
            metric=_required(name="metric that shows the effect", value=metric, limit=200),
            rollback_plan=_required(name="rollback plan", value=rollback_plan, limit=2000),
            approved_by=(approved_by or "").strip()[:200],
            proposed_by=proposed_by,
            unit=(unit or "").strip()[:40],
            baseline=baseline,
            threshold=threshold,
            higher_is_better=higher_is_better,
            state=ChangeState.PROPOSED.value,
            proposed_at=self._clock(),
        )
        with session_scope(self._engine) as session:
            warning = self._unvalidated_warning(session=session, incident_key=incident_key, excluding=None)
            change_repo.add(session, change=row)
            self._on_event(
                session=session,
                incident_key=incident_key,
                kind="change_proposed",
                actor=proposed_by,
                text=f"Change #{row.id} proposed: {row.what} (variable: {row.variable}; rollback: {row.rollback_plan})",
            )
            view = self._view(session=session, row=row)
        return ChangeOutcome(change=view, warning=warning)

    def apply(self, *, change_id: int, actor: str) -> ChangeOutcome:
        """Mark a change applied; warn when another change is still unvalidated."""
        return self._transition(change_id=change_id, actor=actor, target=ChangeState.APPLIED)

    def validate(self, *, change_id: int, actor: str) -> ChangeOutcome:
        """Promote a change only when its gain repeated across the validation windows."""
        return self._transition(change_id=change_id, actor=actor, target=ChangeState.VALIDATED)

    def roll_back(self, *, change_id: int, actor: str) -> ChangeOutcome:
        """Record that the rollback plan was carried out."""
        return self._transition(change_id=change_id, actor=actor, target=ChangeState.ROLLED_BACK)

    def measure(
        self,
        *,
        change_id: int,
        window: str,
        value: float,
        unit: str,
        actor: str,
        baseline: float | None = None,
        threshold: float | None = None,
    ) -> ChangeView:
        """Attach one window's number; baseline and threshold default to the change's own."""
        window = _required(name="window label", value=window, limit=60)
        unit = _required(name="unit", value=unit, limit=40)
        with session_scope(self._engine) as session:
            row = self._load(session=session, change_id=change_id)
            chosen_baseline = baseline if baseline is not None else row.baseline
            chosen_threshold = threshold if threshold is not None else row.threshold
            if chosen_baseline is None or chosen_threshold is None:
                raise ChangeError(
                    f"Change #{change_id} has no baseline or acceptance threshold: give them with the measurement, "
                    f"e.g. `/triage measure {change_id} {window} {value:g}{unit} vs <baseline> -> <threshold>`."
                )
            if row.baseline is None or row.threshold is None:
                # The first measurement that names them sets the change's own, so later windows need not repeat them.
                row.baseline, row.threshold = chosen_baseline, chosen_threshold
                row.higher_is_better = chosen_threshold >= chosen_baseline
                change_repo.save(session, change=row)
            if row.unit and unit != row.unit:
                raise ChangeError(f"Change #{change_id} is measured in {row.unit!r}, not {unit!r}.")
            change_repo.add_measurement(
                session,
                measurement=tables.Measurement(
                    change_id=change_id,
                    window=window,
                    metric=row.metric,
                    value=value,
                    unit=unit,
                    baseline=chosen_baseline,
                    threshold=chosen_threshold,
                    taken_by=actor,
                    taken_at=self._clock(),
                ),
            )
            self._on_event(
                session=session,
                incident_key=row.incident_key,
                kind="change_measured",
                actor=actor,
                text=f"Change #{change_id} {row.metric} in window {window}: {value:g} {unit} "
                f"(baseline {chosen_baseline:g}, threshold {chosen_threshold:g})",
            )
            return self._view(session=session, row=row)

    def get(self, *, change_id: int) -> ChangeView:
        """One change with its measurements."""
        with session_scope(self._engine) as session:
            return self._view(session=session, row=self._load(session=session, change_id=change_id))

    def for_incident(self, *, incident_key: str) -> tuple[ChangeView, ...]:
        """Every change of an incident, oldest first."""
        with session_scope(self._engine) as session:
            rows = change_repo.for_incident(session, incident_key=incident_key)
            return tuple(self._view(session=session, row=row) for row in rows)

    def _transition(self, *, change_id: int, actor: str, target: ChangeState) -> ChangeOutcome:
        with session_scope(self._engine) as session:
            row = self._load(session=session, change_id=change_id)
            current = ChangeState(row.state)
            if current not in _ALLOWED_FROM[target]:
                raise ChangeError(
                    f"Change #{change_id} is {current.value}; it cannot become {target.value} from there."
                )
            warning = ""
            if target is ChangeState.APPLIED:
                warning = self._unvalidated_warning(
                    session=session,
                    incident_key=row.incident_key,
                    excluding=change_id,
                    states=(ChangeState.APPLIED,),
                )
            if target is ChangeState.VALIDATED:
                view = self._view(session=session, row=row)
                if not view.gain_repeated:
                    raise ChangeError(
                        f"Change #{change_id} cannot be validated yet: its gain must beat the baseline and reach "
                        f"the threshold in at least {MIN_VALIDATION_WINDOWS} windows "
                        f"({len({m.window for m in view.measurements})} measured). Measure again, or roll it back."
                    )
            now = self._clock()
            row.state = target.value
            setattr(row, f"{target.value}_at", now)
            change_repo.save(session, change=row)
            self._on_event(
                session=session,
                incident_key=row.incident_key,
                kind=f"change_{target.value}",
                actor=actor,
                text=f"Change #{change_id} {target.value.replace('_', ' ')}: {row.what}",
            )
            return ChangeOutcome(change=self._view(session=session, row=row), warning=warning)

    def _unvalidated_warning(
        self,
        *,
        session: Session,
        incident_key: str,
        excluding: int | None,
        states: tuple[ChangeState, ...] = UNVALIDATED,
    ) -> str:
        candidates = change_repo.in_states(
            session, incident_key=incident_key, states=[state.value for state in states]
        )
        others = [row for row in candidates if row.id != excluding]
        if not others:
            return ""
        listed = ", ".join(f"#{row.id} ({row.variable}, {row.state})" for row in others)
        return (
            f"Another change is still unvalidated: {listed}. Tune one lever at a time: validate or roll it "
            "back before changing a second variable, or the measurements cannot say which change helped."
        )

    @staticmethod
    def _load(*, session: Session, change_id: int) -> tables.Change:
        row = change_repo.get(session, change_id=change_id)
        if row is None:
            raise ChangeError(f"There is no change #{change_id}.")
        return row

    @staticmethod
    def _view(*, session: Session, row: tables.Change) -> ChangeView:
        measured = change_repo.measurements(session, change_id=row.id)
        return change_view(row=row, measurements=measured)


def change_view(*, row: tables.Change, measurements: Sequence[tables.Measurement] = ()) -> ChangeView:
    """Plain data from rows, for records and exports."""
    assert row.id is not None and row.proposed_at is not None
    return ChangeView(
        id=row.id,
        incident_key=row.incident_key,
        what=row.what,
        variable=row.variable,
        expected_effect=row.expected_effect,
        metric=row.metric,
        unit=row.unit,
        baseline=row.baseline,
        threshold=row.threshold,
        higher_is_better=row.higher_is_better,
        rollback_plan=row.rollback_plan,
        approved_by=row.approved_by,
        proposed_by=row.proposed_by,
        state=ChangeState(row.state),
        proposed_at=row.proposed_at,
        applied_at=row.applied_at,
        validated_at=row.validated_at,
        rolled_back_at=row.rolled_back_at,
        measurements=tuple(
            MeasurementView(
                window=item.window,
                metric=item.metric,
                value=item.value,
                unit=item.unit,
                baseline=item.baseline,
                threshold=item.threshold,
                taken_at=item.taken_at,  # type: ignore[arg-type]
                taken_by=item.taken_by,
            )
            for item in measurements
        ),
    )
