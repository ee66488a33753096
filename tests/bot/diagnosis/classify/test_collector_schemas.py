"""Observations shaped exactly as the collectors document them (docs/observations*.md) classify as expected."""

from __future__ import annotations

from bot.diagnosis.classify import CONFIDENT, diagnose_observations
from bot.evidence import findings
from tests.bot.diagnosis.classify.observations import observation

LAYER = findings.Layer


def _rules(diagnosis) -> dict[str, findings.Finding]:
    return {item.rule: item for item in diagnosis.findings}


def test_a_slurm_job_waiting_for_a_node_drained_by_an_xid_is_a_runtime_root_with_the_wait_caused_by_it() -> (
    None
):
    diagnosis = diagnose_observations(
        [
            observation(
                kind="slurm_pending_reason",
                subject="slurm:42",
                text="Reason=ReqNodeNotAvail",
                reason="ReqNodeNotAvail",
                category="nodes",
                unavailable_nodes=["gpu-absent-1"],
                node_reasons={"gpu-absent-1": "Xid 79 GPU has fallen off the bus (PCI:0000:3b:00)"},
            ),
            observation(
                kind="slurm_node",
                subject="node:gpu-absent-1",
                node="gpu-absent-1",
                text="gpu-absent-1 DOWN+DRAIN+NOT_RESPONDING: Xid 79 GPU has fallen off the bus",
                state="DOWN",
                full_state="DOWN+DRAIN+NOT_RESPONDING",
                xids=[79],
            ),
            observation(
                kind="gpu_xid",
                subject="node:gpu-absent-1",
                node="gpu-absent-1",
                xid=79,
                known=True,
                usual_cause="hardware",
                evidence="slurm_drain_reason",
                text="gpu-absent-1 Xid 79 (GPU has fallen off the bus): drain the node",
            ),
        ]
    )
    rules = _rules(diagnosis)
    assert diagnosis.verdict.layer is LAYER.RUNTIME
    assert diagnosis.verdict.confidence >= CONFIDENT
    assert rules["scheduler.slurm.node-not-available"].caused_by is not None


def test_a_slurm_job_pending_for_resources_alone_is_a_confident_scheduler_capacity_verdict() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="slurm_pending_reason",
                subject="slurm:7",
                text="JobState=PENDING Reason=Resources",
                reason="Resources",
                category="capacity",
            )
        ]
    )
    assert diagnosis.verdict.layer is LAYER.SCHEDULER
    assert diagnosis.verdict.confidence >= CONFIDENT
    assert "scheduler.slurm.resources" in _rules(diagnosis)


def test_slurm_out_of_memory_from_the_job_and_its_step_is_runtime() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="slurm_job",
                subject="slurm:9",
                text="job 9 OUT_OF_MEMORY exit 0:125",
                state="OUT_OF_MEMORY",
                category="oom",
            ),
            observation(
                kind="slurm_step",
                subject="slurm:9.0",
                text="step 9.0 OUT_OF_MEMORY",
                state="OUT_OF_MEMORY",
                oom=True,
                failing=True,
                exit_code=0,
            ),
        ]
    )
    assert diagnosis.verdict.layer is LAYER.RUNTIME
    assert len(_rules(diagnosis)["runtime.oom-killed"].evidence) == 2


def test_a_slurm_time_limit_alone_is_an_unsure_workflow_symptom() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="slurm_job", subject="slurm:3", text="job 3 TIMEOUT after 01:00:00", state="TIMEOUT"
            )
        ]
    )
    assert diagnosis.verdict.layer is LAYER.WORKFLOW
    assert diagnosis.verdict.confidence < CONFIDENT


def test_gpu_health_with_double_bit_ecc_errors_is_runtime_integrity() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="gpu_health",
                subject="gpu:gpu-node-05/3",
                check="nvidia-smi",
                node="gpu-node-05",
                status="degraded",
                ecc_volatile_dbe=2,
                remapped_rows_pending=False,
                text="gpu-node-05 GPU 3 degraded: volatile DBE 2",
            )
        ]
    )
    rules = _rules(diagnosis)
    assert "runtime.gpu-ecc" in rules and "runtime.gpu-health-degraded" not in rules
    assert diagnosis.verdict.scope is findings.Scope.NODE_LOCAL


def test_a_failed_dcgm_diagnostic_is_runtime_and_a_passing_one_is_nothing() -> None:
    failed = observation(
        kind="gpu_health",
        subject="node:gpu-node-05",
        check="dcgmi-diag",
        test="Memory",
        result="Fail",
        status="failed",
        text="gpu-node-05 dcgmi diag Hardware/Memory: Fail",
    )
    passed = observation(
        kind="gpu_health",
        subject="node:gpu-node-06",
        check="dcgmi-diag",
        test="Memory",
        result="Pass",
        status="ok",
        text="gpu-node-06 dcgmi diag Hardware/Memory: Pass",
    )
    assert "runtime.dcgm-diag" in _rules(diagnose_observations([failed]))
    healthy = diagnose_observations([passed])
    assert healthy.findings == () and healthy.unexplained == ()


def test_nccl_events_with_the_collectors_scope_decision_keep_that_scope() -> None:
    watchdogs = [
        observation(
            kind="nccl_error",
            subject=f"rank:{rank}",
            error_type="watchdog_timeout",
            host=f"node-{rank}",
            text=f"[Rank {rank}] Watchdog caught collective operation timeout",
        )
        for rank in range(8)
    ]
    ib = observation(
        kind="nccl_error",
        subject="rank:3",
        error_type="ib_completion",
        host="node-3",
        hca="mlx5_2",
        status=12,
        text="NCCL WARN NET/IB : Got completion from peer 10.0.0.9 with status=12",
    )
    scope = observation(
        kind="fabric_scope",
        subject="logs",
        scope="node-local",
        suspect_host="node-3",
        text="Fabric scope node-local: errors only on node-3",
    )
    diagnosis = diagnose_observations([*watchdogs, ib, scope])
    assert diagnosis.verdict.layer is LAYER.FABRIC
    assert diagnosis.verdict.scope is findings.Scope.NODE_LOCAL
    assert _rules(diagnosis)["fabric.collective-timeout"].caused_by == "fabric.nccl-ib-error"
    assert all(item.kind != "fabric_scope" for item in diagnosis.unexplained)


def test_a_cuda_failure_reported_through_nccl_is_runtime_not_fabric() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="nccl_error",
                subject="rank:7",
                error_type="nccl_error",
                host="node-7",
                text="NCCL error in: NCCLUtils.hpp:275, unhandled cuda error, NCCL version 2.20.5",
            )
        ]
    )
    assert diagnosis.verdict.layer is LAYER.RUNTIME


def test_an_ib_port_down_is_fabric_and_an_active_one_is_nothing() -> None:
    down = observation(
        kind="ib_link",
        subject="node:gpu-node-03/mlx5_2:1",
        node="gpu-node-03",
        hca="mlx5_2",
        state="Down",
        physical_state="Polling",
        problem="port down",
        text="mlx5_2 port 1 Down/Polling",
    )
    up = observation(
        kind="ib_link",
        subject="node:gpu-node-04/mlx5_2:1",
        node="gpu-node-04",
        hca="mlx5_2",
        state="Active",
        physical_state="LinkUp",
        problem=None,
        text="mlx5_2 port 1 Active/LinkUp 400",
    )
    assert diagnose_observations([down]).verdict.layer is LAYER.FABRIC
    healthy = diagnose_observations([up])
    assert healthy.findings == () and healthy.unexplained == ()


def test_node_conditions_that_report_no_pressure_are_not_pressure() -> None:
    fine = [
        observation(
            kind="node_condition",
            subject="node:gpu-node-01",
            type=kind,
            status="False",
            text=f"gpu-node-01 {kind}=False KubeletHasSufficientMemory",
            abnormal=False,
        )
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    ready = observation(
        kind="node_condition",
        subject="node:gpu-node-01",
        type="Ready",
        status="True",
        text="gpu-node-01 Ready=True KubeletReady",
    )
    diagnosis = diagnose_observations([*fine, ready])
    assert diagnosis.verdict.layer is None and diagnosis.findings == ()


def test_a_node_under_memory_pressure_is_runtime() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="node_condition",
                subject="node:gpu-node-01",
                type="MemoryPressure",
                status="True",
                text="gpu-node-01 MemoryPressure=True KubeletHasInsufficientMemory",
            )
        ]
    )
    assert "runtime.node-pressure" in _rules(diagnosis)


def test_a_kueue_workload_without_quota_is_scheduler_quota() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="kueue_workload",
                subject="workload/ml/job-train-7c1d2",
                admitted=False,
                quota_reserved=False,
                reason="Pending",
                queue_name="team-ml",
                message="couldn't assign flavors to pod set main: insufficient unused quota for "
                "nvidia.com/gpu in flavor h200, 16 more needed",
                text="Kueue workload job-train-7c1d2 not admitted",
            )
        ]
    )
    assert diagnosis.verdict.layer is LAYER.SCHEDULER
    assert "scheduler.kueue.inadmissible" in _rules(diagnosis)


def test_an_application_xid_is_runtime_but_not_a_hardware_integrity_finding() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="gpu_xid",
                subject="node:gpu-node-02",
                node="gpu-node-02",
                xid=13,
                known=True,
                usual_cause="application",
                text="gpu-node-02 Xid 13 (Graphics Engine Exception)",
            )
        ]
    )
    rules = _rules(diagnosis)
    assert set(rules) == {"runtime.gpu-xid-application"}
    assert rules["runtime.gpu-xid-application"].severity is findings.Severity.MEDIUM


def test_withdrawn_gpus_explain_pods_short_of_gpus() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="node_capacity",
                subject="node/gpu-node-05",
                gpu_capacity=8,
                gpu_allocatable=7,
                text="gpu-node-05 nvidia.com/gpu capacity 8 allocatable 7",
            ),
            observation(
                kind="pod_condition",
                type="PodScheduled",
                status="False",
                reason="Unschedulable",
                message="0/16 nodes are available: 16 Insufficient nvidia.com/gpu.",
                text="PodScheduled=False Unschedulable 0/16 nodes are available: 16 Insufficient nvidia.com/gpu.",
            ),
        ]
    )
    assert diagnosis.verdict.layer is LAYER.RUNTIME
    assert _rules(diagnosis)["scheduler.k8s.insufficient-resources"].caused_by == "runtime.gpu-withdrawn"


def test_snapshot_self_reports_are_never_classified() -> None:
    forbidden = observation(
        kind="api_forbidden",
        subject="snapshot",
        collector="events",
        resource="events",
        status=403,
        text="events is forbidden: User cannot list resource events",
    )
    diagnosis = diagnose_observations([forbidden])
    assert diagnosis.findings == () and diagnosis.unexplained == ()
