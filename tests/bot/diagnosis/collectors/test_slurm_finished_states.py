"""Finished states the one-host cluster cannot produce (OOM needs cgroup memory limits, NODE_FAIL a dying node).

The job lines are the real recorded `scontrol` output of a failed job with only JobState/Reason/ExitCode
changed, served through the backend interface, so the collector's mapping is what is under test. The OOM
sacct rows are written in the format of the recorded tests/fixtures/slurm/sacct_failed_step.txt.
"""

from __future__ import annotations

import pytest

from bot.config import SnapshotBounds
from bot.diagnosis.collectors.slurm import cli as slurm_cli
from bot.diagnosis.collectors.slurm import collector as slurm
from bot.diagnosis.collectors.slurm import parse as slurm_parse
from bot.diagnosis.collectors.slurm.model import (
    Accounting,
    Fetched,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmStep,
)
from tests.support.paths import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "slurm"
FAILED_LINE = (FIXTURES / "scontrol_job_failed_exit3.txt").read_text().strip()


class RecordedBackend:
    """Serves recorded scontrol/sacct text through the SlurmBackend interface."""

    name = "recorded"

    def __init__(self, *, job_line: str, sacct: str = "") -> None:
        self._job_line = job_line
        self._sacct = sacct

    def version(self) -> Fetched[str | None]:
        return Fetched(data="22.05.8", command="scontrol --version")

    def job(self, *, job_id: str) -> Fetched[SlurmJob | None]:
        return Fetched(
            data=slurm_cli.job_from_scontrol(self._job_line), command=f"scontrol show job {job_id}"
        )

    def partition(self, *, name: str) -> Fetched[SlurmPartition | None]:
        return Fetched(data=None, command=f"scontrol show partition {name}")

    def partition_node_states(self, *, name: str) -> Fetched[dict[str, int]]:
        return Fetched(data={}, command="sinfo")

    def nodes(self, *, names: list[str]) -> Fetched[list[SlurmNode]]:
        return Fetched(data=[], command="scontrol show node")

    def steps(self, *, job_id: str) -> Fetched[list[SlurmStep]]:
        return Fetched(data=[], command="scontrol show step")

    def accounting(self, *, job_id: str) -> Fetched[Accounting]:
        rows = slurm_parse.parse_sacct_parsable(self._sacct, columns=slurm_cli.SACCT_COLUMNS)
        return Fetched(
            data=Accounting(enabled=bool(rows), steps=tuple(slurm_cli.step_from_sacct(r) for r in rows)),
            command="sacct",
        )


def _derived(state: str, reason: str, exit_code: str) -> str:
    return (
        FAILED_LINE.replace("JobState=FAILED", f"JobState={state}")
        .replace("Reason=NonZeroExitCode", f"Reason={reason}")
        .replace("ExitCode=3:0", f"ExitCode={exit_code}")
    )


@pytest.mark.parametrize(
    ("state", "reason", "exit_code", "category", "layer"),
    [
        ("OUT_OF_MEMORY", "OutOfMemory", "0:125", "oom", "runtime"),
        ("NODE_FAIL", "NodeDown", "0:0", "node_failure", "runtime"),
        ("TIMEOUT", "TimeLimit", "0:15", "timeout", "workflow"),
        ("PREEMPTED", "None", "0:15", "preempted", "scheduler"),
        ("COMPLETED", "None", "0:0", "completed", "workflow"),
    ],
)
def test_finished_states_map_to_a_category_and_layer(
    state: str, reason: str, exit_code: str, category: str, layer: str
) -> None:
    backend = RecordedBackend(job_line=_derived(state, reason, exit_code))
    _, observations, _ = slurm.collect_slurm_job(job_id="1", bounds=SnapshotBounds(), backend=backend)
    job = next(item for item in observations if item.kind == "slurm_job").fields
    assert (job["state"], job["category"], job["layer"]) == (state, category, layer)


def test_an_oom_step_from_sacct_is_flagged_and_is_the_failing_step() -> None:
    sacct = (
        "9|train|OUT_OF_MEMORY|0:125|gpu-node-03|2026-11-29T22:07:54|2026-11-29T22:08:54|00:01:00||4000M\n"
        "9.batch|batch|OUT_OF_MEMORY|0:125|gpu-node-03|2026-11-29T22:07:54|2026-11-29T22:08:54|00:01:00|3999M|\n"
        "9.0|python|OUT_OF_MEMORY|0:125|gpu-node-03|2026-11-29T22:07:55|2026-11-29T22:08:54|00:00:59|3998M|\n"
    )
    backend = RecordedBackend(job_line=_derived("OUT_OF_MEMORY", "OutOfMemory", "0:125"), sacct=sacct)
    _, observations, _ = slurm.collect_slurm_job(job_id="9", bounds=SnapshotBounds(), backend=backend)
    steps = {item.fields["step_id"]: item.fields for item in observations if item.kind == "slurm_step"}
    assert steps["9.0"]["oom"] is True and steps["9.0"]["failing"] is True
    assert steps["9.batch"]["failing"] is False
