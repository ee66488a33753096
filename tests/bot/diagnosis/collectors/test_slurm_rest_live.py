"""The slurmrestd backend against the real slurmrestd (JWT) that .ci/setup.d/30-slurm.sh starts on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import SnapshotBounds, load_settings
from bot.diagnosis.collectors.slurm import collector as slurm
from bot.diagnosis.collectors.slurm.rest import RestBackend
from bot.evidence.findings import CollectorOutcome

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm client tools are not installed"),
]

URL = os.environ.get("TRIAGE_TEST_SLURMRESTD_URL", "http://127.0.0.1:6820")


@pytest.fixture(scope="module")
def token() -> str:
    """A short-lived JWT from the controller (`scontrol token`)."""
    done = subprocess.run(
        ["scontrol", "token", "username=root", "lifespan=600"],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
    )
    assert done.returncode == 0, f"scontrol token failed (is auth/jwt configured?): {done.stderr}"
    return done.stdout.strip().split("=", 1)[1]


@pytest.fixture(scope="module")
def pinned_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A job pinned to the drained node: pending on ReqNodeNotAvail."""
    workdir: Path = tmp_path_factory.mktemp("rest-jobs")
    done = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "-w", "gpu-absent-1", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=15,
        check=True,
        cwd=workdir,
    )
    job_id = done.stdout.strip()
    stop = time.monotonic() + 30
    while time.monotonic() < stop:
        out = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%r"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout
        if out.strip() and out.strip() != "None":
            break
        time.sleep(0.5)
    yield job_id
    subprocess.run(["scancel", job_id], capture_output=True, timeout=15, check=False)


def test_the_rest_backend_classifies_the_same_pending_reason_as_the_cli(token: str, pinned_job: str) -> None:
    backend = RestBackend(base_url=URL, token=token, user="root", timeout_seconds=10)
    reports, observations, placement = slurm.collect_slurm_job(
        job_id=pinned_job, bounds=SnapshotBounds(), backend=backend
    )
    pending = next(item for item in observations if item.kind == "slurm_pending_reason").fields
    assert pending["reason"] == "ReqNodeNotAvail"
    assert pending["category"] == "nodes"
    assert pending["unavailable_nodes"] == ["gpu-absent-1"]
    assert "Xid 79" in pending["node_reasons"]["gpu-absent-1"]
    assert placement["slurm_backend"] == "rest"
    assert placement["slurm_version"].startswith("22.05")
    assert all(report.outcome is CollectorOutcome.OK for report in reports if report.name.startswith("slurm."))
    dcgm = next(report for report in reports if report.name == "gpu.dcgm")
    assert dcgm.outcome is CollectorOutcome.SKIPPED and "TRIAGE_PROMETHEUS_URL" in dcgm.detail


def test_an_unknown_job_over_rest_is_reported_as_not_found(token: str) -> None:
    backend = RestBackend(base_url=URL, token=token, user="root", timeout_seconds=10)
    _, observations, _ = slurm.collect_slurm_job(
        job_id="4000000000", bounds=SnapshotBounds(), backend=backend
    )
    assert observations[0].fields["found"] is False


def test_a_bad_token_is_an_error_that_names_the_token_not_a_missing_job(pinned_job: str) -> None:
    backend = RestBackend(base_url=URL, token="not-a-jwt", user="root", timeout_seconds=10)
    reports, observations, _ = slurm.collect_slurm_job(
        job_id=pinned_job, bounds=SnapshotBounds(), backend=backend
    )
    job_report = next(report for report in reports if report.name == "slurm.job")
    assert job_report.outcome is CollectorOutcome.ERROR
    assert "token" in job_report.detail
    assert observations == []


def test_settings_pick_the_rest_backend_when_asked(token: str) -> None:
    settings = load_settings(
        TRIAGE_SLURM_BACKEND="rest", TRIAGE_SLURMRESTD_URL=URL, SLURM_JWT=token, TRIAGE_SLURMRESTD_USER="root"
    )
    assert isinstance(slurm.make_backend(settings=settings), RestBackend)
    with pytest.raises(ValueError, match="SLURM_JWT"):
        slurm.make_backend(
            settings=load_settings(TRIAGE_SLURM_BACKEND="rest", TRIAGE_SLURMRESTD_URL=URL, SLURM_JWT=None)
        )


def test_without_the_slurmdb_plugin_rest_accounting_is_reported_as_not_enabled(
    token: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "exit 3"],
        capture_output=True,
        text=True,
        timeout=15,
        check=True,
        cwd=tmp_path,
    )
    job_id = done.stdout.strip()
    stop = time.monotonic() + 30
    while time.monotonic() < stop:
        state = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
        if not state:
            break
        time.sleep(0.5)
    backend = RestBackend(base_url=URL, token=token, user="root", timeout_seconds=10)
    reports, observations, _ = slurm.collect_slurm_job(
        job_id=job_id, bounds=SnapshotBounds(), backend=backend
    )
    job = next(item for item in observations if item.kind == "slurm_job").fields
    assert (job["state"], job["exit_code"]) == ("FAILED", 3)
    accounting = next(item for item in observations if item.kind == "slurm_accounting").fields
    assert accounting["enabled"] is False
    assert next(r for r in reports if r.name == "slurm.accounting").outcome is CollectorOutcome.SKIPPED
