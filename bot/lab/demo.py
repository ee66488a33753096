"""The demo incident as plain core logic: who types what, and a clearly labelled minimal diagnoser.

The edge (handlers/slack/demo.py) plays these steps through the real Slack app; nothing here knows Slack.
When the lab from "Bounded diagnostic snapshot" exists (`bot.diagnosis.service.lab_diagnoser`) the demo uses it.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from datetime import datetime, timedelta

from bot.config import Settings
from bot.evidence import findings
from bot.evidence.report import Diagnoser, SnapshotReport
from bot.evidence.targets import Target

MINIMAL_LABEL = "minimal demo cluster"
DEFAULT_TARGET = "ml/train-llm"
LAB_SCENARIO = "oom"
CHANNEL_ID = "C0DEMOINC"
COMMANDER = "U0ALICE"
OWNER = "U0BOB"
SCRIBE = "U0CAROL"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoStep:
    """One slash command a responder types, and why (printed as a caption).

    A step with `wait_minutes` and no text moves the demo's clock on instead, and lets the scheduler run
    whatever fell due (validation windows, update reminders)."""

    user_id: str
    text: str
    caption: str
    wait_minutes: int = 0


class DemoClock:
    """Real time plus however far the demo has skipped ahead, so scheduled work fires without waiting."""

    def __init__(self) -> None:
        self._offset = timedelta()

    def __call__(self) -> datetime:
        return findings.utcnow() + self._offset

    def advance(self, *, minutes: int) -> None:
        """Skip ahead."""
        self._offset += timedelta(minutes=minutes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DemoDiagnoser:
    """Which diagnoser the demo uses, what to call it on screen, and which workload it knows."""

    diagnoser: Diagnoser
    label: str
    target: str


def minimal_diagnoser(*, target: Target, settings: Settings) -> SnapshotReport:
    """A stand-in cluster with one OOM-killed trainer: a real-looking runtime finding, labelled as such."""
    del settings
    now = findings.utcnow()
    pod = f"{target.name}-worker-0"
    command = f"kubectl get pod -n {target.namespace or 'default'} {pod} -o jsonpath='{{.status.containerStatuses[0].lastState}}'"
    observation = findings.Observation(
        source="kubernetes",
        kind="container_terminated",
        subject=pod,
        text="lastState.terminated: reason=OOMKilled exitCode=137 (limit memory=64Gi)",
        command=command,
        observed_at=now - timedelta(seconds=40),
        fields={"reason": "OOMKilled", "exit_code": 137, "memory_limit": "64Gi"},
    )
    evidence = findings.Evidence(
        source="kubernetes",
        command=command,
        excerpt=observation.text,
        observed_at=observation.observed_at,
        expected="container running (or Completed, exit 0)",
        observed="OOMKilled, exit 137, restarted 3 times",
    )
    finding = findings.Finding(
        layer=findings.Layer.RUNTIME,
        rule="runtime.oom_killed",
        severity=findings.Severity.HIGH,
        summary=f"{pod} was OOM-killed (exit 137) at its 64Gi memory limit; the job restarts and fails again.",
        evidence=(evidence,),
        next_step="Compare peak RSS with the limit; raise the limit or cut the per-rank batch size.",
        scope=findings.Scope.WORKLOAD,
        subject=pod,
    )
    verdict = findings.Verdict(
        layer=findings.Layer.RUNTIME,
        confidence=0.8,
        scope=findings.Scope.WORKLOAD,
        summary=f"Runtime: the trainer exceeds its memory limit ({MINIMAL_LABEL}).",
    )
    return SnapshotReport(
        target=target.key,
        target_kind="job",
        taken_at=now,
        elapsed_ms=12,
        verdict=verdict,
        findings=(finding,),
        collectors=(
            findings.CollectorReport(
                name=f"kubernetes ({MINIMAL_LABEL})",
                outcome=findings.CollectorOutcome.OK,
                elapsed_ms=12,
                items=1,
            ),
        ),
        observations=(observation,),
        placement={
            "node": "gpu-node-07",
            "image": "registry.local/train-llm:2.4.1",
            "gpu": "NVIDIA H100 80GB HBM3",
        },
        not_checked=(f"everything beyond one pod: this is the {MINIMAL_LABEL}",),
    )


def pick_diagnoser() -> DemoDiagnoser:
    """The lab cluster's diagnoser when it exists, else the minimal one (labelled on every output).

    `bot.diagnosis.service.lab_diagnoser` may be a diagnoser itself or a factory taking the lab scenario;
    the demo plays the OOM scenario, whose story (a trainer over its memory limit) the steps tell.
    """
    try:
        module = importlib.import_module("bot.diagnosis.service")
        lab = module.lab_diagnoser
    except (ImportError, AttributeError):
        return DemoDiagnoser(diagnoser=minimal_diagnoser, label=MINIMAL_LABEL, target=DEFAULT_TARGET)
    parameters = inspect.signature(lab).parameters
    if "target" in parameters:
        diagnoser = lab
    elif "scenario" in parameters:
        diagnoser = lab(scenario=LAB_SCENARIO)
    else:
        diagnoser = lab()
    target = _scenario_target(LAB_SCENARIO) or str(getattr(module, "LAB_DEMO_TARGET", DEFAULT_TARGET))
    return DemoDiagnoser(diagnoser=diagnoser, label=f"lab cluster, scenario {LAB_SCENARIO}", target=target)


def _scenario_target(name: str) -> str | None:
    """The failing workload of a lab scenario, when the lab offers scenarios."""
    try:
        scenarios = importlib.import_module("bot.lab.scenarios")
        return str(scenarios.build(name).target)
    except (ImportError, AttributeError, KeyError, ValueError):
        return None


def demo_steps(*, target: str) -> list[DemoStep]:
    """One whole incident, from opening to resolution."""
    return [
        DemoStep(
            user_id=COMMANDER, text=f"job {target}", caption="Alice opens an incident for the failing job"
        ),
        DemoStep(
            user_id=COMMANDER,
            text=f"assign <@{OWNER}|bob> owner:runtime",
            caption="Alice makes Bob the runtime owner",
        ),
        DemoStep(
            user_id=COMMANDER, text=f"assign <@{SCRIBE}|carol> scribe", caption="Carol keeps the record"
        ),
        DemoStep(user_id=OWNER, text="status identified", caption="Bob confirms the cause"),
        DemoStep(
            user_id=OWNER,
            text="note Raised the trainer memory limit 64Gi -> 96Gi (rollback: re-apply revision 41)",
            caption="Bob records the change and its rollback",
        ),
        DemoStep(user_id=OWNER, text="status mitigated", caption="The job runs again"),
        DemoStep(
            user_id=SCRIBE,
            text="note Two validation windows passed: steps steady, no restarts",
            caption="Carol records validation",
        ),
        DemoStep(
            user_id=OWNER,
            text="change resources.limits.memory | Raise the trainer memory limit 64Gi -> 96Gi | no OOMKilled "
            "restarts for an hour | steps between restarts | re-apply revision 41 | 400 -> 2000 steps",
            caption="Bob records it as a change: one variable, expected effect, metric, rollback, target",
        ),
        DemoStep(user_id=OWNER, text="change 1 applied", caption="Bob applies it; re-validation windows are queued"),
        DemoStep(user_id="", text="", caption="15 minutes later: the scheduler re-runs the snapshot", wait_minutes=15),
        DemoStep(user_id=SCRIBE, text="measure 1 +15m 2400steps", caption="Carol measures the first window"),
        DemoStep(user_id="", text="", caption="45 minutes later: a reminder and the +60m window", wait_minutes=45),
        DemoStep(user_id=SCRIBE, text="measure 1 +60m 900steps", caption="...and the second: the gain did not repeat"),
        DemoStep(user_id=OWNER, text="change 1 validated", caption="Bob tries to validate it: refused"),
        DemoStep(user_id=OWNER, text="change 1 rolled-back", caption="The OOM still reproduces: Bob rolls it back"),
        DemoStep(
            user_id=OWNER,
            text="note remediation: pinned the tokenizer to 0.19, which pads to 4096 tokens again",
            caption="Bob records what fixed it",
        ),
        DemoStep(
            user_id=OWNER,
            text="note root cause: the tokenizer upgrade doubled activation memory per rank",
            caption="Bob states the root cause for the postmortem",
        ),
        DemoStep(
            user_id=COMMANDER,
            text=f"prevent <@{SCRIBE}|carol> 2026-12-15 Alert when trainer RSS passes 90% of its limit | "
            "the alert fires in the staging replay",
            caption="Alice adds a prevention action with an owner, a due date and a guardrail check",
        ),
        DemoStep(user_id=COMMANDER, text="list", caption="Alice checks what is still open"),
        DemoStep(user_id=COMMANDER, text="status resolved", caption="Alice resolves the incident"),
    ]
