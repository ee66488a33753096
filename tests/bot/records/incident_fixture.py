"""A whole incident as plain data, built from the real findings types, for record tests."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from bot.changes.prevention import PreventionView
from bot.changes.service import ChangeState, ChangeView, MeasurementView
from bot.evidence import findings
from bot.evidence.report import SnapshotReport
from bot.records.build import IncidentData, RoleEntry, TimelineItem

OPENED = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


def snapshot_report(*, taken_at: datetime, failing: bool) -> SnapshotReport:
    evidence = findings.Evidence(
        source="kubernetes",
        command="kubectl get events -n train --sort-by=.lastTimestamp",
        excerpt="0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
        observed_at=taken_at,
        expected="pod scheduled within 60s",
        observed="Pending for 14m: Insufficient nvidia.com/gpu",
    )
    found = (
        (
            findings.Finding(
                layer=findings.Layer.SCHEDULER,
                rule="k8s.pending.insufficient_gpu",
                severity=findings.Severity.HIGH,
                summary="Pod cannot be placed: no node has a free GPU",
                evidence=(evidence,),
                next_step="kubectl describe nodes | grep -A5 Allocated",
                scope=findings.Scope.WORKLOAD,
            ),
        )
        if failing
        else ()
    )
    verdict = findings.Verdict(
        layer=findings.Layer.SCHEDULER if failing else None,
        confidence=0.9 if failing else 0.0,
        summary="Scheduler: GPUs exhausted" if failing else "No failure found",
        scope=findings.Scope.WORKLOAD if failing else None,
    )
    return SnapshotReport(
        target="k8s:train/llama-ft",
        target_kind="k8s-job",
        taken_at=taken_at,
        elapsed_ms=840,
        verdict=verdict,
        findings=found,
        collectors=(
            findings.CollectorReport(
                name="kubernetes", outcome=findings.CollectorOutcome.OK, elapsed_ms=500, items=12
            ),
            findings.CollectorReport(
                name="fabric", outcome=findings.CollectorOutcome.SKIPPED, elapsed_ms=0, detail="probes off"
            ),
        ),
        observations=(
            findings.Observation(
                source="kubernetes",
                kind="pod",
                subject="train/llama-ft-0",
                text="llama-ft-0 Pending",
                command="kubectl get pods -n train -o wide",
                observed_at=taken_at,
            ),
        ),
        placement={"image": "nvcr.io/nvidia/pytorch:24.10-py3", "node": "gpu-node-3", "driver": "550.90.07"},
        not_checked=("node GPU health (probes off)",),
    )


def measured_change() -> ChangeView:
    return ChangeView(
        id=1,
        incident_key="INC-0001",
        what="Lower replicas from 4 to 2",
        variable="replicas",
        expected_effect="job schedules within 1 minute",
        metric="scheduled pods",
        unit="pods",
        baseline=0.0,
        threshold=2.0,
        higher_is_better=True,
        rollback_plan="kubectl scale --replicas=4",
        approved_by="U_LEAD",
        proposed_by="U_ALICE",
        state=ChangeState.ROLLED_BACK,
        proposed_at=OPENED + timedelta(minutes=20),
        applied_at=OPENED + timedelta(minutes=22),
        validated_at=None,
        rolled_back_at=OPENED + timedelta(minutes=90),
        measurements=(
            MeasurementView(
                window="+15m",
                metric="scheduled pods",
                value=2,
                unit="pods",
                baseline=0,
                threshold=2,
                taken_at=OPENED + timedelta(minutes=37),
            ),
            MeasurementView(
                window="+60m",
                metric="scheduled pods",
                value=1,
                unit="pods",
                baseline=0,
                threshold=2,
                taken_at=OPENED + timedelta(minutes=82),
            ),
        ),
    )


def incident(**overrides: object) -> IncidentData:
    fields: dict[str, object] = {
        "key": "INC-0001",
        "title": "llama-ft stuck Pending",
        "target": "k8s:train/llama-ft",
        "severity": "high",
        "status": "resolved",
        "opened_at": OPENED,
        "opened_by": "U_ALICE",
        "channel": "C_INCIDENTS",
        "resolved_at": OPENED + timedelta(hours=2, minutes=5),
        "roles": (
            RoleEntry(role="commander", user="U_ALICE"),
            RoleEntry(role="owner", user="U_BOB"),
            RoleEntry(role="owner:fabric", user="U_CAROL"),
        ),
        "timeline": (
            TimelineItem(
                at=OPENED, kind="opened", actor="U_ALICE", text="Incident opened for k8s:train/llama-ft"
            ),
            TimelineItem(
                at=OPENED + timedelta(minutes=5),
                kind="note",
                actor="U_BOB",
                text="root cause: quota for team train lowered to 8 GPUs by the nightly policy sync",
            ),
            TimelineItem(
                at=OPENED + timedelta(minutes=6),
                kind="note",
                actor="U_BOB",
                text="impact: fine-tuning of llama-ft delayed 2h, 4 researchers blocked",
            ),
            TimelineItem(
                at=OPENED + timedelta(minutes=7),
                kind="note",
                actor="U_BOB",
                text="summary: a policy sync shrank the team's GPU quota",
            ),
            TimelineItem(
                at=OPENED + timedelta(minutes=100),
                kind="note",
                actor="U_BOB",
                text="remediation: restored the quota to 32 GPUs",
            ),
            TimelineItem(
                at=OPENED + timedelta(minutes=101),
                kind="note",
                actor="U_BOB",
                text="next: confirm the policy sync no longer rewrites quotas",
            ),
        ),
        "snapshots": (
            snapshot_report(taken_at=OPENED + timedelta(minutes=1), failing=True).to_dict(
                include_observations=True
            ),
        ),
        "changes": (measured_change(),),
        "prevention": (
            PreventionView(
                id=1,
                incident_key="INC-0001",
                description="Alert when team quota drops by >25%",
                owner="U_CAROL",
                due_on=date(2026, 12, 1),
                guardrail_check="quota-diff CI job fails on a drop",
                status="open",
                created_at=OPENED + timedelta(hours=2),
                completed_at=None,
            ),
        ),
        "validations": (
            {
                "change_id": 1,
                "window": "+15m",
                "reproduces": True,
                "still_reproducing_rules": ["k8s.pending.insufficient_gpu"],
                "original_rules": ["k8s.pending.insufficient_gpu"],
                "taken_at": "2026-11-20T14:37:00+00:00",
            },
        ),
    }
    fields.update(overrides)
    return IncidentData(**fields)  # type: ignore[arg-type]
