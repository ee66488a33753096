"""The terminal's Slurm path redacts like every other: a token a job printed never reaches stdout."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from handlers.main import typer_app

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(shutil.which("sbatch") is None, reason="Slurm client tools are not installed"),
]

TOKEN = "xoxb-2712345678901-5123456789012-Qm8T3vKx9LpR2sWzYb4NcJ7d"


def _state(job_id: str) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True,
                         timeout=10, check=False).stdout
    return next((item.split("=", 1)[1] for item in out.split() if item.startswith("JobState=")), "")


def test_a_token_in_a_slurm_jobs_output_is_redacted_on_the_terminal(tmp_path: Path) -> None:
    output = tmp_path / "leaky-%j.out"
    done = subprocess.run(
        ["sbatch", "--parsable", "-J", "triage-leak", "-o", str(output), "-e", str(output),
         f"--chdir={tmp_path}", "--wrap",
         (f"echo 'Traceback (most recent call last):'; echo 'RuntimeError: NCCL error: unhandled system error, "
          f"token {TOKEN}'; echo 'CUDA error: out of memory {TOKEN}'; exit 3")],
        capture_output=True, text=True, timeout=15, check=True,
    )
    job_id = done.stdout.strip().split(";")[0]
    try:
        stop = time.monotonic() + 60
        while _state(job_id) not in {"FAILED", "COMPLETED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}:
            assert time.monotonic() < stop, f"job {job_id} did not finish"
            time.sleep(0.5)
        for shape in ("json", "text"):
            result = CliRunner().invoke(typer_app(), ["triage", "job", f"slurm:{job_id}", "--format", shape])
            assert "NCCL error" in result.stdout  # the job's output was read and quoted
            assert TOKEN not in result.stdout + result.stderr
    finally:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=15, check=False)
