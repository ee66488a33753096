"""Slurm text and JSON parsing on outputs recorded from the real test cluster (tests/fixtures/slurm/)."""

from __future__ import annotations

import json

import pytest

from bot.diagnosis.collectors.slurm import cli as slurm_cli
from bot.diagnosis.collectors.slurm import parse as slurm_parse
from bot.diagnosis.collectors.slurm import rest as slurm_rest
from bot.diagnosis.collectors.slurm.model import minutes_from_slurm_duration
from bot.diagnosis.collectors.slurm.observations import failing_step
from bot.diagnosis.knowledge import slurm_reasons
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "slurm"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_a_running_gres_job_line_gives_state_nodes_and_allocated_gpu_indexes() -> None:
    job = slurm_cli.job_from_scontrol(_text("scontrol_job_running_gres.txt").strip())
    assert job.state == "RUNNING"
    assert job.nodes == ("localhost",)
    assert job.gres_req == "gres:gpu:2"
    assert job.gres_alloc == ("gpu:h200:2(IDX:0-1)",)
    assert job.tres_alloc["cpu"] == "1"
    assert job.tres_req == {}
    assert job.user == "root"


def test_a_pending_line_splits_the_reason_from_the_nodes_it_waits_for() -> None:
    job = slurm_cli.job_from_scontrol(_text("scontrol_job_pending_reqnodenotavail.txt").strip())
    assert job.pending
    assert job.reason_code == "ReqNodeNotAvail"
    assert job.unavailable_nodes == ("gpu-absent-1",)
    assert job.req_nodes == ("gpu-absent-1",)
    assert job.reason_raw == "ReqNodeNotAvail, UnavailableNodes:gpu-absent-1"
    assert job.tres_req["mem"].endswith("M")


def test_a_failed_line_gives_exit_code_and_signal() -> None:
    job = slurm_cli.job_from_scontrol(_text("scontrol_job_failed_exit3.txt").strip())
    assert (job.state, job.exit_code, job.exit_signal) == ("FAILED", 3, 0)
    assert job.finished


def test_a_dependency_line_keeps_the_dependency_expression() -> None:
    job = slurm_cli.job_from_scontrol(_text("scontrol_job_pending_dependency.txt").strip())
    assert job.reason_code == "Dependency"
    assert job.dependency is not None and job.dependency.startswith("afterok:")
    assert slurm_parse.parse_dependency(job.dependency)[0]["state"] == "unfulfilled"


def test_node_lines_keep_the_whole_drain_reason_and_split_who_set_it() -> None:
    nodes = [
        slurm_cli.node_from_scontrol(record)
        for record in slurm_parse.parse_scontrol_records(_text("scontrol_nodes.txt"))
    ]
    drained = next(node for node in nodes if node.name == "gpu-absent-1")
    assert drained.state == "DOWN"
    assert set(drained.state_flags) >= {"DRAIN", "NOT_RESPONDING"}
    assert drained.reason == "Xid 79 GPU has fallen off the bus (PCI:0000:3b:00)"
    assert drained.reason_set_by == "root"
    assert drained.unavailable
    healthy = next(node for node in nodes if node.name == "localhost")
    assert healthy.gres == "gpu:h200:2"


def test_a_partition_line_gives_its_limits_in_minutes() -> None:
    record = slurm_parse.parse_scontrol_records(_text("scontrol_partition_small.txt"))[0]
    partition = slurm_cli.partition_from_scontrol(record)
    assert (partition.name, partition.state, partition.max_nodes, partition.max_time_minutes) == (
        "small",
        "UP",
        1,
        10,
    )


def test_the_rest_job_object_normalises_to_the_same_shape_as_the_cli_line() -> None:
    body = json.loads(_text("rest_v0.0.38_job_pending_reqnodenotavail.json"))
    job = slurm_rest.job_from_rest(body["jobs"][0])
    cli = slurm_cli.job_from_scontrol(_text("scontrol_job_pending_reqnodenotavail.txt").strip())
    assert (job.state, job.reason_code, job.unavailable_nodes, job.partition) == (
        cli.state,
        cli.reason_code,
        cli.unavailable_nodes,
        cli.partition,
    )


def test_the_rest_exit_code_is_a_wait_status_and_is_decoded() -> None:
    body = json.loads(_text("rest_v0.0.38_job_failed_exit3.json"))
    job = slurm_rest.job_from_rest(body["jobs"][0])
    assert (job.state, job.exit_code, job.exit_signal) == ("FAILED", 3, 0)


def test_the_rest_node_and_partition_objects_match_the_cli_view() -> None:
    node = slurm_rest.node_from_rest(json.loads(_text("rest_v0.0.38_node_drained.json"))["nodes"][0])
    assert (node.state, "DRAIN" in node.state_flags) == ("DOWN", True)
    assert node.reason == "Xid 79 GPU has fallen off the bus (PCI:0000:3b:00)"
    partition = slurm_rest.partition_from_rest(
        json.loads(_text("rest_v0.0.38_partition_small.json"))["partitions"][0]
    )
    assert (partition.state, partition.max_nodes, partition.max_time_minutes) == ("UP", 1, 10)


def test_later_openapi_number_objects_and_state_lists_are_read() -> None:
    job = slurm_rest.job_from_rest(
        {
            "job_id": 7,
            "job_state": ["PENDING"],
            "state_reason": "Priority",
            "time_limit": {"set": True, "infinite": False, "number": 30},
            "submit_time": {"set": True, "number": 1795990073},
            "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
        }
    )
    assert (job.state, job.reason_code, job.time_limit_minutes, job.exit_code) == (
        "PENDING",
        "Priority",
        30,
        0,
    )
    assert job.submit_time is not None


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("localhost", ["localhost"]),
        ("gpu-absent-[1-2],localhost", ["gpu-absent-1", "gpu-absent-2", "localhost"]),
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("rack[1-2]-gpu[1-2]", ["rack1-gpu1", "rack1-gpu2", "rack2-gpu1", "rack2-gpu2"]),
    ],
)
def test_hostlists_expand_like_scontrol_show_hostnames(expression: str, names: list[str]) -> None:
    assert slurm_parse.expand_hostlist(expression) == names


def test_a_huge_hostlist_stops_at_the_limit() -> None:
    assert len(slurm_parse.expand_hostlist("n[1-100000]", limit=50)) == 50


def test_a_node_reason_with_an_equals_sign_falls_back_to_key_splitting_without_losing_state() -> None:
    record = slurm_parse.parse_scontrol_record(
        "NodeName=n1 State=IDLE+DRAIN Reason=healthcheck rc=3 [root@now]"
    )
    assert record["State"] == "IDLE+DRAIN"
    assert record["NodeName"] == "n1"


@pytest.mark.parametrize(
    ("code", "category"),
    [
        ("Resources", "capacity"),
        ("Priority", "policy"),
        ("QOSMaxGRESPerUser", "policy"),
        ("AssocGrpGRES", "policy"),
        ("PartitionDown", "partition"),
        ("PartitionNodeLimit", "partition"),
        ("PartitionConfig", "partition"),
        ("ReqNodeNotAvail", "nodes"),
        ("Dependency", "dependency"),
        ("JobHeldUser", "held"),
        ("JobHeldAdmin", "held"),
        ("BeginTime", "begin_time"),
        ("InvalidQOS", "submission"),
        ("SomethingNew", "unknown"),
    ],
)
def test_pending_reasons_fall_in_the_right_category(code: str, category: str) -> None:
    reason = slurm_reasons.classify_pending_reason(code)
    assert reason.category == category
    assert reason.unblock


def test_an_unknown_reason_is_not_guessed() -> None:
    reason = slurm_reasons.classify_pending_reason("SomethingNew")
    assert "not in our table" in reason.meaning


@pytest.mark.parametrize(
    ("raw", "minutes"),
    [
        ("00:10:00", 10),
        ("1-00:00:00", 1440),
        ("UNLIMITED", None),
        ("30", 30),
        ("10:30", 11),
        ("2-03", 3060),
    ],
)
def test_slurm_durations_become_minutes(raw: str, minutes: int | None) -> None:
    assert minutes_from_slurm_duration(raw) == minutes


def test_sacct_rows_give_each_steps_state_and_exit_code() -> None:
    rows = slurm_parse.parse_sacct_parsable(_text("sacct_failed_step.txt"), columns=slurm_cli.SACCT_COLUMNS)
    steps = [slurm_cli.step_from_sacct(row) for row in rows]
    assert [(step.step_id.split(".", 1)[-1], step.state, step.exit_code) for step in steps] == [
        (steps[0].step_id, "FAILED", 2),
        ("batch", "FAILED", 2),
        ("0", "COMPLETED", 0),
        ("1", "FAILED", 1),
    ]
    assert steps[3].name == "false" and steps[3].nodelist == "localhost"


def test_the_failing_step_is_the_srun_step_not_the_batch_step_that_failed_because_of_it() -> None:

    rows = slurm_parse.parse_sacct_parsable(_text("sacct_failed_step.txt"), columns=slurm_cli.SACCT_COLUMNS)
    failing = failing_step(tuple(slurm_cli.step_from_sacct(row) for row in rows))
    assert failing is not None and failing.step_id.endswith(".1")
