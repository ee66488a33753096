"""Conflicts are resolved by evidence: root causes win, symptoms are `caused_by`, unknown stays unknown."""

from __future__ import annotations

from bot.diagnosis.classify import CONFIDENT, diagnose_observations
from bot.evidence import findings
from tests.bot.diagnosis.classify.observations import observation

TRT_LOG = (
    "[TRT] [E] 1: [stdArchiveReader.cpp::StdArchiveReader::35] Error Code 1: Serialization (Serialization "
    "assertion safeVersionRead == safeSerializationVersion failed.Version tag does not match. "
    "Note: Current Version: 0, Serialized Engine Version: 96)"
)
WATCHDOG = (
    "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
    "Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
)
IB_ERROR = (
    "node-3:3468:3905 [4] NCCL WARN NET/IB : Got completion from peer 10.0.0.7<54862> with status=12 "
    "opcode=0 len=0 vendor err 129 (Recv)"
)


def _by_rule(diagnosis, rule):
    return next(item for item in diagnosis.findings if item.rule == rule)


def test_a_pod_exiting_1_with_a_tensorrt_serialization_error_is_workflow_not_runtime() -> None:
    diagnosis = diagnose_observations(
        [
            observation(
                kind="container_termination", text="terminated: Error exit 1", reason="Error", exit_code=1
            ),
            observation(
                kind="container_state",
                text="back-off 5m0s restarting failed container",
                state="waiting",
                reason="CrashLoopBackOff",
                restart_count=7,
            ),
            observation(kind="log_line", text=TRT_LOG, container="triton"),
        ]
    )
    assert diagnosis.verdict.layer is findings.Layer.WORKFLOW
    assert diagnosis.verdict.confidence >= CONFIDENT
    root = _by_rule(diagnosis, "workflow.tensorrt-engine-mismatch")
    assert root.caused_by is None
    assert _by_rule(diagnosis, "runtime.crashloop").caused_by == root.rule
    assert _by_rule(diagnosis, "runtime.exit-nonzero").caused_by == root.rule


def test_a_collective_timeout_on_every_rank_with_one_ib_error_is_fabric_scoped_to_that_path() -> None:
    ranks = [
        observation(
            kind="log_line",
            text=WATCHDOG.format(rank=rank),
            subject=f"pod/ns/train-{rank}",
            node=f"node-{rank}",
        )
        for rank in range(8)
    ]
    ib = observation(kind="log_line", text=IB_ERROR, subject="pod/ns/train-3", node="node-3")
    diagnosis = diagnose_observations([*ranks, ib])
    assert diagnosis.verdict.layer is findings.Layer.FABRIC
    assert diagnosis.verdict.scope is findings.Scope.PATH_LOCAL
    timeout = _by_rule(diagnosis, "fabric.collective-timeout")
    assert timeout.caused_by == "fabric.nccl-ib-error"
    assert len(timeout.evidence) == 8
    assert [item.layer for item in diagnosis.findings if item.caused_by is None] == [findings.Layer.FABRIC]


def test_ib_errors_on_many_hosts_are_fabric_wide() -> None:
    diagnosis = diagnose_observations(
        [
            observation(kind="log_line", text=IB_ERROR, subject=f"pod/ns/w-{n}", node=f"node-{n}")
            for n in range(4)
        ]
    )
    assert diagnosis.verdict.scope is findings.Scope.FABRIC_WIDE


def test_a_collective_timeout_alone_is_fabric_with_low_confidence_and_says_the_root_is_missing() -> None:
    diagnosis = diagnose_observations([observation(kind="log_line", text=WATCHDOG.format(rank=0))])
    assert diagnosis.verdict.layer is findings.Layer.FABRIC
    assert diagnosis.verdict.confidence < CONFIDENT
    assert "root cause not evidenced" in diagnosis.verdict.summary


def test_an_xid_on_one_node_explains_the_collective_timeouts_of_the_others() -> None:
    diagnosis = diagnose_observations(
        [
            observation(kind="log_line", text=WATCHDOG.format(rank=1)),
            observation(
                kind="gpu_xid",
                text="NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
                subject="node/gpu-7",
                xid=79,
                node="gpu-7",
                gpu_pci="0000:44:00",
            ),
        ]
    )
    assert diagnosis.verdict.layer is findings.Layer.RUNTIME
    assert diagnosis.verdict.scope is findings.Scope.NODE_LOCAL
    assert _by_rule(diagnosis, "fabric.collective-timeout").caused_by in {
        "runtime.gpu-lost",
        "runtime.gpu-xid",
    }


def test_unknown_evidence_yields_no_layer_and_lists_what_was_not_explained() -> None:
    odd = observation(kind="log_line", text="fatal: frobnicator exploded unexpectedly")
    fine = observation(kind="pod_condition", text="Ready=True", type="Ready", status="True")
    diagnosis = diagnose_observations([odd, fine])
    assert diagnosis.verdict.layer is None
    assert diagnosis.verdict.confidence == 0.0
    assert diagnosis.findings == ()
    assert diagnosis.unexplained == (odd,)


def test_no_observations_means_no_verdict_and_nothing_unexplained() -> None:
    diagnosis = diagnose_observations([])
    assert diagnosis.verdict.layer is None
    assert diagnosis.unexplained == ()


def test_structured_fields_classify_without_any_text() -> None:
    diagnosis = diagnose_observations(
        [observation(kind="container_termination", text="", reason="OOMKilled", exit_code=137, node="gpu-2")]
    )
    finding = _by_rule(diagnosis, "runtime.oom-killed")
    assert diagnosis.verdict.layer is findings.Layer.RUNTIME
    assert "gpu-2" in finding.next_step


def test_failed_scheduling_says_capacity_and_policy_when_the_message_names_both() -> None:
    message = (
        "0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint {gpu: }."
    )
    diagnosis = diagnose_observations(
        [observation(kind="event", text=message, reason="FailedScheduling", type="Warning", message=message)]
    )
    rules = {item.rule for item in diagnosis.findings}
    assert {"scheduler.k8s.insufficient-resources", "scheduler.k8s.untolerated-taint"} <= rules
    assert diagnosis.verdict.layer is findings.Layer.SCHEDULER


def test_a_low_bandwidth_probe_is_fabric_and_cites_expected_versus_observed() -> None:
    probe = observation(
        kind="fabric_probe",
        text="ib_write_bw node-1 -> node-2: 180 Gb/s",
        subject="path/node-1/node-2",
        expected="390 Gb/s",
        observed="180 Gb/s",
        ratio=0.46,
    )
    diagnosis = diagnose_observations([probe])
    finding = _by_rule(diagnosis, "fabric.low-bandwidth")
    assert diagnosis.verdict.layer is findings.Layer.FABRIC
    assert finding.evidence[0].command == "kubectl get fabric_probe"
    assert finding.evidence[0].expected


def test_a_healthy_probe_is_not_a_finding() -> None:
    probe = observation(kind="fabric_probe", text="ib_write_bw 385 Gb/s", ratio=0.98)
    diagnosis = diagnose_observations([probe])
    assert diagnosis.findings == ()
    assert diagnosis.unexplained == ()


def test_competing_roots_in_two_layers_lower_the_confidence() -> None:
    alone = diagnose_observations([observation(kind="log_line", text=TRT_LOG)])
    both = diagnose_observations(
        [
            observation(kind="log_line", text=TRT_LOG),
            observation(kind="log_line", text=IB_ERROR, node="node-3"),
        ]
    )
    assert both.verdict.confidence < alone.verdict.confidence
    assert "competing evidence" in both.verdict.summary


def test_an_error_at_the_end_of_a_huge_line_is_still_found() -> None:
    line = "step " * 200_000 + IB_ERROR
    diagnosis = diagnose_observations([observation(kind="log_line", text=line)])
    assert diagnosis.verdict.layer is findings.Layer.FABRIC
    assert "more chars in the snapshot" in diagnosis.findings[0].evidence[0].excerpt
