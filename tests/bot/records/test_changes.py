"""Changes: rollback required, one lever at a time, validated only when the gain repeats."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
import sqlalchemy

from bot.changes.service import (
    ChangeError,
    ChangeService,
    ChangeState,
    parse_change_text,
    parse_value_with_unit,
)


def propose(service: ChangeService, **overrides: object):
    fields = {
        "incident_key": "INC-0001",
        "what": "Raise NCCL_IB_QPS_PER_CONNECTION from 1 to 4",
        "variable": "NCCL_IB_QPS_PER_CONNECTION",
        "expected_effect": "all-reduce bus bandwidth back above 180 GB/s",
        "metric": "busbw",
        "rollback_plan": "set NCCL_IB_QPS_PER_CONNECTION=1 and restart the job",
        "approved_by": "U_LEAD",
        "proposed_by": "U_ALICE",
        "unit": "GB/s",
        "baseline": 120.0,
        "threshold": 180.0,
    }
    fields.update(overrides)
    return service.propose(**fields)


def test_a_change_without_a_rollback_plan_is_refused_and_nothing_is_written(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    with pytest.raises(ChangeError, match="rollback plan is required"):
        propose(service, rollback_plan="   ")
    assert service.for_incident(incident_key="INC-0001") == ()


def test_a_second_change_while_one_is_unvalidated_warns_one_lever_at_a_time(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    first = propose(service)
    assert first.warning == ""
    second = propose(service, variable="NCCL_ALGO", what="Force NCCL_ALGO=Ring")
    assert "one lever at a time" in second.warning
    assert f"#{first.change.id}" in second.warning


def test_no_warning_once_the_earlier_change_was_rolled_back(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    first = propose(service)
    service.apply(change_id=first.change.id, actor="U_ALICE")
    service.roll_back(change_id=first.change.id, actor="U_ALICE")
    assert propose(service, variable="NCCL_ALGO").warning == ""


def test_gain_repeated_needs_benefit_beyond_threshold_in_at_least_two_windows(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    change_id = propose(service).change.id
    service.apply(change_id=change_id, actor="U_ALICE")
    view = service.measure(change_id=change_id, window="+15m", value=190, unit="GB/s", actor="U_ALICE")
    assert not view.gain_repeated  # one window is not a repeat
    clock.advance(timedelta(minutes=45))
    view = service.measure(change_id=change_id, window="+60m", value=185, unit="GB/s", actor="U_ALICE")
    assert view.gain_repeated
    assert [m.window for m in view.measurements] == ["+15m", "+60m"]
    assert view.measurements[1].taken_at == clock.now


def test_one_window_below_threshold_means_the_gain_did_not_repeat(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    change_id = propose(service).change.id
    service.apply(change_id=change_id, actor="U_ALICE")
    service.measure(change_id=change_id, window="+15m", value=190, unit="GB/s", actor="U_ALICE")
    view = service.measure(change_id=change_id, window="+60m", value=150, unit="GB/s", actor="U_ALICE")
    assert not view.gain_repeated
    with pytest.raises(ChangeError, match="cannot be validated yet"):
        service.validate(change_id=change_id, actor="U_ALICE")
    assert service.get(change_id=change_id).state is ChangeState.APPLIED


def test_lower_is_better_metrics_count_a_drop_as_the_benefit(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    change_id = propose(
        service, metric="p99 latency", unit="ms", baseline=900, threshold=400, higher_is_better=False
    ).change.id
    service.apply(change_id=change_id, actor="U")
    service.measure(change_id=change_id, window="w1", value=350, unit="ms", actor="U")
    service.measure(change_id=change_id, window="w2", value=380, unit="ms", actor="U")
    outcome = service.validate(change_id=change_id, actor="U")
    assert outcome.change.state is ChangeState.VALIDATED
    assert outcome.change.validated_at == clock.now


def test_states_move_only_forward_with_a_clear_refusal(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    change_id = propose(service).change.id
    with pytest.raises(ChangeError, match="is proposed; it cannot become validated"):
        service.validate(change_id=change_id, actor="U")
    service.roll_back(change_id=change_id, actor="U")
    with pytest.raises(ChangeError, match="is rolled_back"):
        service.apply(change_id=change_id, actor="U")


def test_a_measurement_in_another_unit_is_refused(sqlite_engine, clock) -> None:
    service = ChangeService(engine=sqlite_engine, clock=clock)
    change_id = propose(service).change.id
    with pytest.raises(ChangeError, match="measured in 'GB/s'"):
        service.measure(change_id=change_id, window="+15m", value=3, unit="ms", actor="U")


def test_every_action_reaches_the_timeline_sink_inside_the_transaction(sqlite_engine, clock) -> None:
    events: list[tuple[str, str]] = []

    def sink(*, session, incident_key, kind, actor, text) -> None:
        assert session.in_transaction()
        events.append((kind, incident_key))

    service = ChangeService(engine=sqlite_engine, clock=clock, on_event=sink)
    change_id = propose(service).change.id
    service.apply(change_id=change_id, actor="U")
    service.roll_back(change_id=change_id, actor="U")
    assert [kind for kind, _ in events] == ["change_proposed", "change_applied", "change_rolled_back"]


def test_a_failing_timeline_write_leaves_no_half_recorded_change(sqlite_engine, clock) -> None:
    def broken(**_: object) -> None:
        raise RuntimeError("timeline down")

    service = ChangeService(engine=sqlite_engine, clock=clock, on_event=broken)
    with pytest.raises(RuntimeError):
        propose(service)
    with sqlite_engine.connect() as connection:
        assert connection.execute(sqlalchemy.text("SELECT count(*) FROM record_change")).scalar_one() == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1450tok/s", (1450.0, "tok/s")),
        ("12.5 ms", (12.5, "ms")),
        ("-3%", (-3.0, "%")),
        ("1e3 req/s", (1000.0, "req/s")),
    ],
)
def test_values_with_units_are_read(text: str, expected: tuple[float, str]) -> None:
    assert parse_value_with_unit(text=text) == expected


@pytest.mark.parametrize("text", ["1450", "fast", "", "nan ms"])
def test_values_without_a_number_and_unit_are_refused(text: str) -> None:
    with pytest.raises(ChangeError, match="number with a unit|not a finite"):
        parse_value_with_unit(text=text)


def test_the_one_line_form_reads_every_field_and_the_target() -> None:
    fields = parse_change_text(
        text="NCCL_ALGO | force Ring | busbw up | busbw | unset NCCL_ALGO | 120 -> 180 GB/s"
    )
    assert dataclasses.asdict(fields) == {
        "variable": "NCCL_ALGO",
        "what": "force Ring",
        "expected_effect": "busbw up",
        "metric": "busbw",
        "rollback_plan": "unset NCCL_ALGO",
        "baseline": 120.0,
        "threshold": 180.0,
        "unit": "GB/s",
        "higher_is_better": True,
    }


@pytest.mark.parametrize("text", ["NCCL_ALGO | force Ring | busbw up | busbw |   ", "just words", ""])
def test_the_one_line_form_without_a_rollback_plan_is_refused(text: str) -> None:
    with pytest.raises(ChangeError, match="rollback plan is required"):
        parse_change_text(text=text)
