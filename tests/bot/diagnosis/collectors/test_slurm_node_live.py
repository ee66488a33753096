"""`/triage node slurm:<name>` against the real one-host Slurm cluster (.ci/setup.d/30-slurm.sh), both backends."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings
from bot.diagnosis.collectors.slurm.cli import CliBackend
from bot.diagnosis.collectors.slurm.rest import RestBackend
from bot.diagnosis.service import TargetNotFound, diagnose
from bot.evidence.findings import CollectorOutcome

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm client tools are not installed"),
]

URL = os.environ.get("TRIAGE_TEST_SLURMRESTD_URL", "http://127.0.0.1:6820")


@pytest.fixture(scope="module")
def running_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One small job running on `localhost` (no GPUs, so other Slurm tests keep their capacity)."""
    workdir: Path = tmp_path_factory.mktemp("node-jobs")
    done = subprocess.run(["sbatch", "--parsable", "-J", "node-blast", "-c", "1", "-o", "/dev/null", "-w", "localhost",
                           "--wrap", "sleep 300"], capture_output=True, text=True, timeout=15, check=True, cwd=workdir)
    job_id = done.stdout.strip().split(";")[0]
    stop = time.monotonic() + 60
    while time.monotonic() < stop:
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                               timeout=10, check=False).stdout.strip()
        if state == "RUNNING":
            break
        time.sleep(0.5)
    yield job_id
    subprocess.run(["scancel", job_id], capture_output=True, timeout=15, check=False)


@pytest.fixture(scope="module")
def token() -> str:
    done = subprocess.run(["scontrol", "token", "username=root", "lifespan=600"], capture_output=True, text=True,
                          timeout=15, check=False)
    assert done.returncode == 0, f"scontrol token failed (is auth/jwt configured?): {done.stderr}"
    return done.stdout.strip().split("=", 1)[1]


def _backends(token: str) -> dict[str, object]:
    return {"cli": CliBackend(timeout_seconds=10.0, max_bytes=1_000_000),
            "rest": RestBackend(base_url=URL, token=token, user="root", timeout_seconds=10)}


@pytest.mark.parametrize("backend_name", ["cli", "rest"])
def test_a_node_drained_for_xid_79_is_a_runtime_fault_with_a_resume_only_after_diagnostics(
    token: str, backend_name: str
) -> None:
    report = diagnose(target="slurm-node:gpu-absent-1", settings=Settings(),
                      slurm_backend=_backends(token)[backend_name])
    assert report.target_kind == "slurm-node" and report.verdict.layer is not None
    assert report.verdict.layer.value == "runtime"
    node = next(item for item in report.observations if item.kind == "slurm_node")
    assert "DRAIN" in node.fields["full_state"] and node.fields["xids"] == [79]
    assert {"runtime.gpu-lost", "runtime.slurm-node-failure", "node.next-steps"} <= {f.rule for f in report.findings}
    steps = next(item for item in report.findings if item.rule == "node.next-steps")
    commands = [item.command for item in steps.evidence]
    assert not any("State=DRAIN" in command for command in commands)  # already drained: not suggested twice
    assert commands[-1] == "scontrol update NodeName=gpu-absent-1 State=RESUME"
    assert any("dcgmi diag -r 3" in command for command in commands)


@pytest.mark.parametrize("backend_name", ["cli", "rest"])
def test_a_healthy_node_shows_the_jobs_running_on_it_and_no_layer(
    running_job: str, token: str, backend_name: str
) -> None:
    report = diagnose(target="slurm-node:localhost", settings=Settings(),
                      slurm_backend=_backends(token)[backend_name])
    assert report.verdict.layer is None
    radius = next(item for item in report.observations if item.kind == "node_blast_radius")
    assert running_job in radius.fields["jobs"]
    job = next(item for item in report.observations if item.kind == "node_workload" and item.subject ==
               f"slurm:{running_job}")
    assert job.fields["job_name"] == "node-blast" and job.fields["state"] == "RUNNING"
    assert {item.outcome for item in report.collectors} <= {CollectorOutcome.OK, CollectorOutcome.SKIPPED}
    assert report.placement["slurm_gres:localhost"] == "gpu:h200:2"


def test_a_node_slurm_does_not_have_is_not_found() -> None:
    with pytest.raises(TargetNotFound, match="no node named nope-17"):
        diagnose(target="slurm-node:nope-17", settings=Settings(TRIAGE_SLURM_BACKEND="cli"))
