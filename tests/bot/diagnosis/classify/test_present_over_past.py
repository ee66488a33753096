"""Verdicts come from the present: history is shown as history, a healthy target gets no layer."""

from __future__ import annotations

import dataclasses

from bot.diagnosis.classify import CONFIDENT, diagnose_observations
from bot.evidence import findings
from tests.bot.diagnosis.classify.observations import observation

SCHEDULING = ("0/16 nodes are available: 4 node(s) didn't match Pod's node affinity/selector, "
              "12 Insufficient nvidia.com/gpu.")


def _failed_scheduling(*, current: bool) -> findings.Observation:
    item = observation(kind="event", text=f"Warning FailedScheduling (x14): {SCHEDULING}", reason="FailedScheduling",
                       message=SCHEDULING, type="Warning")
    return item if current else dataclasses.replace(item, current=False,
                                                    resolved_by="the pod was scheduled to gpu-node-03 after it")


def _health(*, healthy: bool, text: str = "job/ml/train is healthy: 2/2 pod(s) Running and Ready") -> findings.Observation:
    return observation(kind="target_health", subject="job/ml/train", text=text, healthy=healthy,
                       state="healthy" if healthy else "failing")


def test_a_resolved_failed_scheduling_is_history_not_a_scheduler_verdict() -> None:
    diagnosis = diagnose_observations([_failed_scheduling(current=False)])
    assert diagnosis.verdict.layer is None
    assert diagnosis.verdict.summary.startswith("No current failure")
    assert "scheduled to gpu-node-03" in diagnosis.verdict.summary
    (finding, *_) = diagnosis.findings
    assert finding.current is False and finding.resolved_by.startswith("the pod was scheduled")
    assert "(history:" in finding.summary


def test_the_same_event_still_current_is_a_confident_scheduler_verdict() -> None:
    diagnosis = diagnose_observations([_failed_scheduling(current=True)])
    assert diagnosis.verdict.layer is findings.Layer.SCHEDULER
    assert diagnosis.verdict.confidence >= CONFIDENT


def test_a_healthy_target_gets_no_layer_even_when_its_running_containers_log_errors() -> None:
    log = observation(kind="log_line", text="NCCL WARN NET/IB : Got completion from peer 10.0.0.7<1> with status=12",
                      node="gpu-node-03")
    diagnosis = diagnose_observations([log, _health(healthy=True)])
    assert diagnosis.verdict.layer is None and diagnosis.verdict.confidence == 0.0
    assert "2/2 pod(s) Running and Ready" in diagnosis.verdict.summary
    assert "not failing it now" in diagnosis.verdict.summary and "fabric.nccl-ib-error" in diagnosis.verdict.summary


def test_a_failing_target_with_only_history_says_layer_unknown_and_what_happened_before() -> None:
    diagnosis = diagnose_observations([
        _failed_scheduling(current=False),
        _health(healthy=False, text="job/ml/train is failing: pod train-0 Pending (ContainerCreating)")])
    assert diagnosis.verdict.layer is None
    assert diagnosis.verdict.summary.startswith("Layer unknown: job/ml/train is failing")
    assert "before:" in diagnosis.verdict.summary


def test_history_does_not_explain_a_current_symptom() -> None:
    crash = observation(kind="container_state", text="container trainer waiting CrashLoopBackOff, restarts 7",
                        state="waiting", reason="CrashLoopBackOff", restart_count=7)
    old_oom = dataclasses.replace(
        observation(kind="container_termination", text="last terminated OOMKilled exit 137", reason="OOMKilled",
                    exit_code=137), current=False, resolved_by="container trainer running and ready since 2h ago")
    diagnosis = diagnose_observations([crash, old_oom])
    crashloop = next(item for item in diagnosis.findings if item.rule == "runtime.crashloop")
    assert crashloop.caused_by is None
    assert diagnosis.verdict.confidence < CONFIDENT, "only a symptom is current"


def test_unexplained_lists_only_current_observations() -> None:
    odd = observation(kind="log_line", text="fatal: something nobody has a rule for")
    diagnosis = diagnose_observations([dataclasses.replace(odd, current=False, resolved_by="restarted since")])
    assert diagnosis.unexplained == ()
