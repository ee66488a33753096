"""The opt-in node probe runner: refuses unless allowed and capped; runs for real through `srun -w`."""

from __future__ import annotations

import json
import shutil

import pytest

from bot.diagnosis.collectors import node_probe
from bot.evidence.findings import utcnow
from tests.support.paths import FIXTURES

PUBLISHED = FIXTURES / "fabric" / "published"


def test_a_probe_without_explicit_permission_is_refused() -> None:
    with pytest.raises(node_probe.ProbeNotAllowed, match="explicitly allowed"):
        node_probe.run_on_node(
            runner=node_probe.SrunRunner(), node="n1", command=["ibstat"], allow=False, time_cap_seconds=30
        )


def test_a_probe_without_a_configured_runner_is_refused() -> None:
    assert node_probe.make_runner(setting="off") is None
    with pytest.raises(node_probe.ProbeNotAllowed, match="TRIAGE_NODE_PROBE_RUNNER"):
        node_probe.run_on_node(runner=None, node="n1", command=["ibstat"], allow=True, time_cap_seconds=30)


@pytest.mark.parametrize("cap", [None, 0, 301])
def test_a_probe_needs_a_time_cap_within_bounds(cap: float | None) -> None:
    with pytest.raises(node_probe.ProbeNotAllowed, match="time cap"):
        node_probe.run_on_node(
            runner=node_probe.SrunRunner(), node="n1", command=["ibstat"], allow=True, time_cap_seconds=cap
        )


def test_a_node_name_that_could_be_an_option_is_rejected() -> None:
    with pytest.raises(ValueError, match="not a node name"):
        node_probe.run_on_node(
            runner=node_probe.SrunRunner(), node="--uid=0", command=["id"], allow=True, time_cap_seconds=10
        )


def test_the_srun_runner_pins_the_node_and_the_time_limit() -> None:
    argv = node_probe.SrunRunner(partition="gpu").argv(
        node="gpu-node-03", command=["nvidia-smi", "-q", "-x"], time_cap_seconds=90
    )
    assert argv[:4] == ["srun", "-w", "gpu-node-03", "-N1"]
    assert "--time=2" in argv and ["-p", "gpu"] == argv[argv.index("-p") : argv.index("-p") + 2]
    assert argv[-4:] == ["--", "nvidia-smi", "-q", "-x"]


def test_the_debug_pod_template_is_pinned_privileged_and_deadlined() -> None:
    runner = node_probe.make_runner(setting="k8s-debug", image="nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04")
    assert isinstance(runner, node_probe.KubeDebugRunner)
    argv = runner.argv(node="gpu-node-05", command=["nvidia-smi", "-q", "-x"], time_cap_seconds=60)
    overrides = json.loads(
        next(item for item in argv if item.startswith("--overrides="))[len("--overrides=") :]
    )
    spec = overrides["spec"]
    assert (spec["nodeName"], spec["activeDeadlineSeconds"], spec["restartPolicy"]) == (
        "gpu-node-05",
        60,
        "Never",
    )
    assert spec["containers"][0]["command"] == ["nvidia-smi", "-q", "-x"]
    assert "--rm" in argv and argv[0] == "kubectl"


def test_ibstat_ports_down_or_slow_are_named() -> None:
    ports = node_probe.parse_ibstat((PUBLISHED / "ibstat-mooncake-1999.txt").read_text())
    assert [(p.hca, p.state, p.rate_gbps) for p in ports] == [
        ("mlx5_0", "Active", 200.0),
        ("mlx5_1", "Active", 200.0),
        ("mlx5_10", "Down", None),
    ]
    observations = node_probe.ib_link_observations(
        node="gpu-node-03", ports=ports, expected_rate_gbps=400, observed_at=utcnow()
    )
    problems = {item.fields["hca"]: item.fields["problem"] for item in observations}
    assert problems["mlx5_10"] == "port state Down"
    assert problems["mlx5_0"] == "rate 200 Gb/s below the expected 400"


def test_bandwidth_outputs_parse_to_numbers() -> None:
    assert (
        node_probe.parse_all_reduce_perf((PUBLISHED / "all-reduce-perf-nccl-tests-252.txt").read_text())
        == 95.3009
    )
    assert node_probe.parse_ib_write_bw((PUBLISHED / "ib-write-bw-perftest-273.txt").read_text()) == 0.48
    assert node_probe.parse_iperf3_json('{"end": {"sum_received": {"bits_per_second": 94100000000}}}') == 94.1
    assert node_probe.parse_all_reduce_perf("NCCL WARN something broke") is None


@pytest.mark.parametrize(
    ("observed", "ratio", "verdict"),
    [(95.3009, 0.794, "degraded"), (180.0, 1.5, "ok"), (20.0, 0.167, "failed"), (None, None, "not_run")],
)
def test_a_probe_result_is_compared_to_the_recorded_baseline(
    observed: float | None, ratio: float | None, verdict: str
) -> None:
    baseline = node_probe.Baseline(
        probe="all_reduce_perf", expected=120.0, unit="GB/s", source="recorded on this fabric at acceptance"
    )
    assert node_probe.compare(baseline=baseline, observed=observed) == (ratio, verdict)


@pytest.mark.slurm
@pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm client tools are not installed")
def test_srun_runs_the_probe_on_the_named_node_and_reports_against_a_baseline() -> None:
    result = node_probe.run_on_node(
        runner=node_probe.SrunRunner(),
        node="localhost",
        command=["cat", str(PUBLISHED / "all-reduce-perf-nccl-tests-252.txt")],
        allow=True,
        time_cap_seconds=60,
    )
    assert result.ok, result.stderr
    observed = node_probe.parse_all_reduce_perf(result.stdout)
    baseline = node_probe.Baseline(
        probe="all_reduce_perf", expected=120.0, unit="GB/s", source="test baseline"
    )
    observation = node_probe.probe_observation(
        probe="all_reduce_perf",
        nodes=["localhost"],
        baseline=baseline,
        observed=observed,
        result=result,
        time_cap_seconds=60,
        observed_at=utcnow(),
    )
    assert observation.fields["verdict"] == "degraded"
    assert observation.fields["ratio"] == 0.794
    assert observation.command.startswith("srun -w localhost")


@pytest.mark.slurm
@pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm client tools are not installed")
def test_a_probe_tool_missing_on_the_node_is_a_failed_run_not_a_number() -> None:
    result = node_probe.run_on_node(
        runner=node_probe.SrunRunner(),
        node="localhost",
        command=["ib_write_bw_not_installed"],
        allow=True,
        time_cap_seconds=30,
    )
    assert not result.ok
    assert node_probe.parse_ib_write_bw(result.stdout) is None
