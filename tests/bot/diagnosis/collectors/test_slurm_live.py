"""Real Slurm jobs on the one-host test cluster (.ci/setup.d/30-slurm.sh) triaged through the CLI backend."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.config import SnapshotBounds, load_settings
from bot.diagnosis.collectors.slurm import collector as slurm
from bot.diagnosis.collectors.slurm.cli import CliBackend
from bot.diagnosis.service import TargetNotFound, diagnose
from bot.evidence.findings import CollectorOutcome, Observation
from tests.support.paths import FIXTURES

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm client tools are not installed"),
]

Submit = Callable[..., str]


def _scontrol_field(job_id: str, key: str) -> str:
    out = subprocess.run(
        ["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    for token in out.split():
        if token.startswith(f"{key}="):
            return token.split("=", 1)[1]
    return ""


def wait_for(
    job_id: str,
    *,
    states: set[str] | None = None,
    reason_not: set[str] | None = None,
    limit_seconds: float = 60.0,
) -> None:
    """Wait (bounded) until the scheduler has evaluated the job; never an assertion on time."""
    stop = time.monotonic() + limit_seconds
    while time.monotonic() < stop:
        state, reason = _scontrol_field(job_id, "JobState"), _scontrol_field(job_id, "Reason")
        if (states is None or state in states) and (reason_not is None or reason not in reason_not):
            return
        time.sleep(0.5)


@pytest.fixture(scope="module")
def submit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Submit]:
    """sbatch --wrap with argv lists; every job is cancelled at teardown."""
    answer = subprocess.run(
        ["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=15, check=False
    )
    assert answer.returncode == 0, (
        f"sinfo does not answer: {answer.stderr} (did .ci/setup.d/30-slurm.sh run?)"
    )
    workdir: Path = tmp_path_factory.mktemp("slurm-jobs")
    submitted: list[str] = []

    def _submit(*options: str, wrap: str = "sleep 300") -> str:
        argv = [
            "sbatch",
            "--parsable",
            "-J",
            "triage-test",
            "-o",
            "/dev/null",
            "-e",
            "/dev/null",
            f"--chdir={workdir}",
            *options,
            "--wrap",
            wrap,
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=True, cwd=workdir)
        job_id = done.stdout.strip().split(";")[0]
        submitted.append(job_id)
        return job_id

    yield _submit
    if submitted:
        subprocess.run(["scancel", *submitted], capture_output=True, timeout=15, check=False)


@pytest.fixture(scope="module")
def backend() -> CliBackend:
    return CliBackend(timeout_seconds=10.0, max_bytes=1_000_000)


@pytest.fixture(scope="module")
def gpu_blocker(submit: Submit) -> str:
    """A running job holding both GPUs of `localhost`, so a later GPU job waits on Resources."""
    job_id = submit("--gres=gpu:2", "-c", "1")
    wait_for(job_id, states={"RUNNING"})
    return job_id


def _triage(job_id: str, backend: CliBackend) -> tuple[list, dict[str, list[Observation]], dict[str, str]]:
    reports, observations, placement = slurm.collect_slurm_job(
        job_id=job_id, bounds=SnapshotBounds(), backend=backend
    )
    by_kind: dict[str, list[Observation]] = {}
    for item in observations:
        by_kind.setdefault(item.kind, []).append(item)
    return reports, by_kind, placement


def test_a_running_gpu_job_shows_its_node_and_the_gpus_it_was_given(
    gpu_blocker: str, backend: CliBackend
) -> None:
    reports, by_kind, placement = _triage(gpu_blocker, backend)
    job = by_kind["slurm_job"][0].fields
    assert job["state"] == "RUNNING"
    assert job["nodes"] == ["localhost"]
    assert job["gres_req"] == "gres:gpu:2"
    assert job["gres_alloc"] == ["gpu:h200:2(IDX:0-1)"]
    assert placement["slurm_nodes"] == "localhost"
    assert by_kind["slurm_node"][0].fields["node"] == "localhost"
    assert by_kind["slurm_job"][0].command == f"scontrol show job {gpu_blocker}"
    assert {report.name for report in reports} >= {"slurm.job", "slurm.partition", "slurm.nodes"}


def test_a_job_waiting_for_gpus_is_pending_on_resources_with_capacity_category(
    gpu_blocker: str, submit: Submit, backend: CliBackend
) -> None:
    job_id = submit("--gres=gpu:1")
    wait_for(job_id, reason_not={"None", ""})
    _, by_kind, _ = _triage(job_id, backend)
    pending = by_kind["slurm_pending_reason"][0].fields
    assert pending["reason"] == "Resources"
    assert pending["category"] == "capacity"
    # localhost is busy with the blocker (mixed), one absent node drained, one down: no capacity anywhere.
    assert pending["partition_node_states"] == {"drained": 1, "down": 1, "mixed": 1}
    assert pending["layer"] == "scheduler"
    assert by_kind["slurm_job"][0].fields["gres_req"] == "gres:gpu:1"


def test_a_job_on_a_down_partition_says_partition_down_and_how_to_unblock(
    submit: Submit, backend: CliBackend
) -> None:
    job_id = submit("-p", "maint")
    wait_for(job_id, reason_not={"None", ""})
    _, by_kind, _ = _triage(job_id, backend)
    pending = by_kind["slurm_pending_reason"][0].fields
    assert pending["reason"] == "PartitionDown"
    assert pending["category"] == "partition"
    assert pending["partition_state"] == "DOWN"
    assert "PartitionName=maint State=UP" in pending["unblock"]
    assert by_kind["slurm_partition"][0].fields["state"] == "DOWN"


def test_a_held_job_is_held_and_release_unblocks_it(submit: Submit, backend: CliBackend) -> None:
    job_id = submit("-H")
    _, by_kind, _ = _triage(job_id, backend)
    pending = by_kind["slurm_pending_reason"][0].fields
    assert pending["reason"] == "JobHeldUser"
    assert pending["category"] == "held"
    assert f"scontrol release {job_id}" in pending["unblock"]


def test_a_dependent_job_names_its_dependency(gpu_blocker: str, submit: Submit, backend: CliBackend) -> None:
    job_id = submit(f"--dependency=afterok:{gpu_blocker}")
    wait_for(job_id, reason_not={"None", ""})
    _, by_kind, _ = _triage(job_id, backend)
    pending = by_kind["slurm_pending_reason"][0].fields
    assert pending["reason"] == "Dependency"
    assert pending["category"] == "dependency"
    assert pending["dependency"] == f"afterok:{gpu_blocker}(unfulfilled)"


def test_a_job_pinned_to_a_drained_node_shows_which_node_and_its_xid_drain_reason(
    submit: Submit, backend: CliBackend
) -> None:
    job_id = submit("-w", "gpu-absent-1")
    wait_for(job_id, reason_not={"None", ""})
    _, by_kind, _ = _triage(job_id, backend)
    pending = by_kind["slurm_pending_reason"][0].fields
    assert pending["reason"] == "ReqNodeNotAvail"
    assert pending["category"] == "nodes"
    assert pending["unavailable_nodes"] == ["gpu-absent-1"]
    assert "Xid 79" in pending["node_reasons"]["gpu-absent-1"]
    assert pending["node_xids"] == {"gpu-absent-1": [79]}
    assert "DRAIN" in pending["node_states"]["gpu-absent-1"]
    xid = by_kind["gpu_xid"][0].fields
    assert (xid["node"], xid["xid"], xid["drain"], xid["evidence"]) == (
        "gpu-absent-1",
        79,
        True,
        "slurm_drain_reason",
    )


def test_partition_limits_are_named_when_a_job_asks_for_more_than_the_partition_allows(
    submit: Submit, backend: CliBackend
) -> None:
    too_many_nodes = submit("-p", "small", "-N", "2")
    too_long = submit("-p", "small", "-t", "60")
    wait_for(too_many_nodes, reason_not={"None", ""})
    wait_for(too_long, reason_not={"None", ""})
    nodes_pending = _triage(too_many_nodes, backend)[1]["slurm_pending_reason"][0].fields
    time_pending = _triage(too_long, backend)[1]["slurm_pending_reason"][0].fields
    # Slurm first says Partition{Node,Time}Limit, and PartitionConfig once the main scheduler has looked again.
    assert nodes_pending["reason"] in {"PartitionNodeLimit", "PartitionConfig"}
    assert nodes_pending["category"] == "partition"
    assert any("MaxNodes=1" in item for item in nodes_pending["limit_violations"])
    assert time_pending["reason"] in {"PartitionTimeLimit", "PartitionConfig"}
    assert time_pending["category"] == "partition"
    assert any("MaxTime=00:10:00" in item for item in time_pending["limit_violations"])


def test_one_task_of_a_held_array_is_triaged_by_its_array_id(submit: Submit, backend: CliBackend) -> None:
    array_id = submit("--array=0-2", "-H")
    report = diagnose(target=f"slurm:{array_id}_1", settings=load_settings())
    job = next(item for item in report.observations if item.kind == "slurm_job").fields
    assert (job["array_job_id"], job["array_task_id"]) == (array_id, "1")
    pending = next(item for item in report.observations if item.kind == "slurm_pending_reason").fields
    assert (pending["reason"], pending["category"]) == ("JobHeldUser", "held")


def test_a_job_with_a_future_begin_time_waits_on_begin_time(submit: Submit, backend: CliBackend) -> None:
    job_id = submit("--begin=now+1hour")
    wait_for(job_id, reason_not={"None", ""})
    pending = _triage(job_id, backend)[1]["slurm_pending_reason"][0].fields
    assert (pending["reason"], pending["category"]) == ("BeginTime", "begin_time")
    assert pending["begin_time"] is not None


def test_a_submission_slurm_rejects_leaves_no_job_and_triage_says_so(
    backend: CliBackend, tmp_path: Path
) -> None:
    rejected = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "--gres=gpu:9", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
        cwd=tmp_path,
    )
    assert rejected.returncode != 0
    assert "Requested node configuration is not available" in rejected.stderr
    reports, by_kind, _ = _triage("4000000000", backend)
    job = by_kind["slurm_job"][0]
    assert job.fields["found"] is False
    assert job.fields["category"] == "not_found"
    assert "rejected at submission" in job.text
    assert reports[0].outcome is CollectorOutcome.OK
    with pytest.raises(TargetNotFound, match="rejected at submission"):  # the terminal exits 3, Slack says so
        diagnose(target="4000000000", settings=load_settings())


def test_a_failed_job_reports_its_exit_code_and_the_step_that_failed(
    submit: Submit, backend: CliBackend
) -> None:
    job_id = submit(wrap="srun -n1 true; srun -n1 false; exit 2")
    wait_for(job_id, states={"FAILED", "COMPLETED"})
    stop = time.monotonic() + 30
    while True:  # slurmdbd records the job a moment after it ends, and each step's end a moment after its start
        reports, by_kind, _ = _triage(job_id, backend)
        steps = by_kind.get("slurm_step", [])
        if (len(steps) >= 3 and any(step.fields["failing"] for step in steps)) or time.monotonic() > stop:
            break
        time.sleep(0.5)
    job = by_kind["slurm_job"][0].fields
    assert job["state"] == "FAILED"
    assert (job["exit_code"], job["signal"]) == (2, 0)
    assert (job["category"], job["layer"]) == ("application_exit", "workflow")
    assert by_kind["slurm_accounting"][0].fields["enabled"] is True
    failing = [step.fields for step in by_kind["slurm_step"] if step.fields["failing"]]
    assert [(step["step_id"], step["name"], step["exit_code"]) for step in failing] == [
        (f"{job_id}.1", "false", 1)
    ]
    assert next(r for r in reports if r.name == "slurm.accounting").outcome is CollectorOutcome.OK


def test_a_job_over_its_qos_limit_waits_on_policy_and_names_the_limit(
    submit: Submit, backend: CliBackend
) -> None:
    first = submit("--qos=onejob")
    second = submit("--qos=onejob")
    wait_for(first, states={"RUNNING"})
    wait_for(second, reason_not={"None", ""})
    pending = _triage(second, backend)[1]["slurm_pending_reason"][0].fields
    assert pending["reason"] == "QOSMaxJobsPerUserLimit"
    assert pending["category"] == "policy"
    assert "sacctmgr show qos" in pending["unblock"]
    job = _triage(second, backend)[1]["slurm_job"][0].fields
    assert job["qos"] == "onejob"


def test_a_running_job_lists_its_live_steps(submit: Submit, backend: CliBackend) -> None:
    job_id = submit("-p", "small", "-t", "5", wrap="srun -n1 sleep 120")
    wait_for(job_id, states={"RUNNING"})
    stop = time.monotonic() + 30
    steps: list[Observation] = []
    while time.monotonic() < stop and not any(s.fields["step_id"] == f"{job_id}.0" for s in steps):
        steps = _triage(job_id, backend)[1].get("slurm_step", [])
        time.sleep(0.5)
    assert {step.fields["step_id"] for step in steps} >= {f"{job_id}.batch", f"{job_id}.0"}


def test_diagnose_slurm_returns_a_report_with_the_shared_schema(submit: Submit) -> None:
    job_id = submit("-H")
    report = diagnose(target=f"slurm:{job_id}", settings=load_settings())
    data = report.to_dict(include_observations=True)
    assert data["target"] == f"slurm:{job_id}"
    assert data["target_kind"] == "slurm"
    kinds = {item["kind"] for item in data["observations"]}
    assert {"slurm_job", "slurm_pending_reason", "slurm_partition"} <= kinds
    assert data["placement"]["slurm_backend"] == "cli"


def test_a_tight_item_bound_caps_the_nodes_looked_at_and_says_so(submit: Submit, backend: CliBackend) -> None:
    job_id = submit("-w", "gpu-absent-1,gpu-absent-2")
    wait_for(job_id, reason_not={"None", ""})
    reports, observations, _ = slurm.collect_slurm_job(
        job_id=job_id, bounds=SnapshotBounds(max_items_per_list=1), backend=backend
    )
    nodes_report = next(report for report in reports if report.name == "slurm.nodes")
    assert nodes_report.truncated is True
    assert "1 of 2" in nodes_report.detail
    assert len([item for item in observations if item.kind == "slurm_node"]) == 1


LAB_LOGS = FIXTURES / "fabric" / "lab-nccl-ib"
H200_XML = FIXTURES / "gpu" / "h200" / "nvidia-smi-q-x.xml"


def test_nccl_errors_in_a_failed_jobs_output_are_placed_on_the_right_pair_of_hosts(tmp_path: Path) -> None:
    output = tmp_path / "train-%j.out"
    logs = [str(path) for path in sorted(LAB_LOGS.glob("*.log"))]
    done = subprocess.run(
        ["sbatch", "--parsable", "-o", str(output), "--wrap", f"cat {' '.join(logs)}; exit 1"],
        capture_output=True,
        text=True,
        timeout=15,
        check=True,
        cwd=tmp_path,
    )
    job_id = done.stdout.strip()
    wait_for(job_id, states={"FAILED", "COMPLETED"})
    report = diagnose(target=job_id, settings=load_settings())
    observations = report.observations
    scope = next(item for item in observations if item.kind == "fabric_scope").fields
    assert (scope["scope"], scope["pair"]) == ("path-local", ["gpu-node-03", "gpu-node-07"])
    assert any(item.kind == "log_tail" and "NCCL WARN" in item.text for item in observations)
    output_report = next(item for item in report.collectors if item.name == "slurm.output")
    assert output_report.outcome is CollectorOutcome.OK


def test_an_opt_in_gpu_probe_runs_inside_the_running_job_through_srun(
    submit: Submit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in nvidia-smi on PATH that prints the real H200 capture; srun carries PATH to the node.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\nexec cat {H200_XML}\n", encoding="utf-8")
    (fake / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{__import__('os').environ['PATH']}")
    job_id = submit("-p", "small", "-t", "5")
    wait_for(job_id, states={"RUNNING"})
    settings = load_settings(TRIAGE_NODE_PROBE_RUNNER="srun")
    report = diagnose(target=job_id, settings=settings, probe_gpus=True)
    health = [item for item in report.observations if item.kind == "gpu_health"]
    assert [(item.fields["node"], item.fields["product"], item.fields["status"]) for item in health] == [
        ("localhost", "NVIDIA H200", "ok")
    ]
    probe = next(item for item in report.collectors if item.name == "gpu.probe.localhost")
    assert probe.outcome is CollectorOutcome.OK


def test_without_a_configured_runner_the_gpu_probe_is_skipped_and_said_so(submit: Submit) -> None:
    job_id = submit("-p", "small", "-t", "5")
    wait_for(job_id, states={"RUNNING"})
    report = diagnose(
        target=job_id, settings=load_settings(TRIAGE_NODE_PROBE_RUNNER="off"), probe_gpus=True
    )
    assert any("gpu.probe" in line and "TRIAGE_NODE_PROBE_RUNNER" in line for line in report.not_checked)
    assert not any(item.kind == "gpu_health" for item in report.observations)


@pytest.mark.parametrize(
    "options", [("-H",), ("-p", "maint"), ("--begin=now+1hour",), ("-p", "small", "-N", "2")]
)
def test_with_the_classifier_pending_jobs_land_in_the_scheduler_layer(
    submit: Submit, options: tuple[str, ...]
) -> None:
    pytest.importorskip("bot.diagnosis.classify", reason="the classifier is merged from another branch")
    job_id = submit(*options)
    wait_for(job_id, reason_not={"None", ""})
    report = diagnose(target=job_id, settings=load_settings())
    assert report.verdict.layer is not None and report.verdict.layer.value == "scheduler"
