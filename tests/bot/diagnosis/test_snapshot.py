"""The snapshot engine always returns, inside its deadline, and says what each collector did."""

from __future__ import annotations

import threading

import pytest

from bot.config import SnapshotBounds
from bot.diagnosis.engine import Budget, CollectorFailure, DeadlineExceeded, Sink, Step, run_snapshot
from bot.evidence.findings import CollectorOutcome, Observation, utcnow


def _observation(text: str = "seen") -> Observation:
    return Observation(source="test", kind="fact", subject="pod/ns/p", text=text, command="kubectl get pod",
                       observed_at=utcnow())


def _reports(result) -> dict[str, tuple[CollectorOutcome, int, bool]]:
    return {r.name: (r.outcome, r.items, r.truncated) for r in result.reports}


def test_a_step_still_running_at_the_deadline_is_a_timeout_and_keeps_what_it_saw() -> None:
    release = threading.Event()

    def slow(sink: Sink) -> None:
        sink.observe(_observation("before the wait"))
        release.wait(30)
        sink.observe(_observation("after the deadline"))

    def quick(sink: Sink) -> None:
        sink.count(3)
        sink.observe(_observation("quick"))

    budget = Budget(bounds=SnapshotBounds(deadline_seconds=0.3))
    try:
        result = run_snapshot(stages=[lambda: [Step(collector="slow", run=slow), Step(collector="quick", run=quick)]],
                              budget=budget)
    finally:
        release.set()
    assert _reports(result) == {"slow": (CollectorOutcome.TIMEOUT, 0, False),
                                "quick": (CollectorOutcome.OK, 3, False)}
    assert sorted(item.text for item in result.observations) == ["before the wait", "quick"]
    assert any(line.startswith("slow: timeout") for line in result.not_checked)


def test_forbidden_and_crashing_collectors_are_reported_not_raised() -> None:
    def denied(sink: Sink) -> None:
        raise CollectorFailure(outcome=CollectorOutcome.FORBIDDEN, detail="pods is forbidden")

    def broken(sink: Sink) -> None:
        raise KeyError("status")

    result = run_snapshot(stages=[lambda: [Step(collector="pods", run=denied), Step(collector="nodes", run=broken)]],
                          budget=Budget(bounds=SnapshotBounds()))
    reports = {r.name: r for r in result.reports}
    assert reports["pods"].outcome is CollectorOutcome.FORBIDDEN and "forbidden" in reports["pods"].detail
    assert reports["nodes"].outcome is CollectorOutcome.ERROR and "KeyError" in reports["nodes"].detail


def test_the_total_evidence_cap_truncates_and_marks_partial() -> None:
    def chatty(sink: Sink) -> None:
        for index in range(100):
            sink.observe(_observation("x" * 90 + str(index)))

    result = run_snapshot(stages=[lambda: [Step(collector="logs", run=chatty)]],
                          budget=Budget(bounds=SnapshotBounds(max_total_evidence_bytes=2048)))
    assert _reports(result)["logs"][0] is CollectorOutcome.PARTIAL
    assert _reports(result)["logs"][2] is True
    assert 0 < len(result.observations) < 100


def test_steps_of_one_collector_merge_into_one_report_with_the_worst_outcome() -> None:
    def fine(sink: Sink) -> None:
        sink.count(2)

    def failing(sink: Sink) -> None:
        sink.count(1)
        raise DeadlineExceeded("no answer")

    result = run_snapshot(stages=[lambda: [Step(collector="events", run=fine), Step(collector="events", run=failing),
                                           Step(collector="events", run=fine)]],
                          budget=Budget(bounds=SnapshotBounds()))
    assert _reports(result) == {"events": (CollectorOutcome.TIMEOUT, 5, False)}


def test_later_stages_see_earlier_results_and_are_not_started_after_the_deadline() -> None:
    found: list[str] = []
    planned: list[str] = []

    def first(sink: Sink) -> None:
        found.append("workload")

    def second() -> list[Step]:
        planned.append(f"saw {found}")
        return [Step(collector="pods", run=lambda sink: sink.count(len(found)))]

    result = run_snapshot(stages=[lambda: [Step(collector="workload", run=first)], second],
                          budget=Budget(bounds=SnapshotBounds()))
    assert planned == ["saw ['workload']"] and _reports(result)["pods"] == (CollectorOutcome.OK, 1, False)

    expired = Budget(bounds=SnapshotBounds(deadline_seconds=1), clock=iter([0.0] + [5.0] * 50).__next__)
    assert run_snapshot(stages=[lambda: [Step(collector="workload", run=first)]], budget=expired).reports == ()


def test_call_timeouts_never_reach_past_the_deadline() -> None:
    now = [0.0]
    budget = Budget(bounds=SnapshotBounds(deadline_seconds=10, call_timeout_seconds=4), clock=lambda: now[0])
    assert budget.call_timeout() == 4
    now[0] = 8.5
    assert budget.call_timeout() == pytest.approx(1.5)
    now[0] = 10.0
    with pytest.raises(DeadlineExceeded):
        budget.call_timeout()


def test_a_failing_stage_planner_is_reported_and_the_snapshot_returns() -> None:
    def explode() -> list[Step]:
        raise RuntimeError("bad plan")

    result = run_snapshot(stages=[explode], budget=Budget(bounds=SnapshotBounds()))
    assert _reports(result) == {"planner": (CollectorOutcome.ERROR, 0, False)}
