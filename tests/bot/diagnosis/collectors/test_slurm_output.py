"""A job record names its output file, so the reader trusts the opened file, never the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.diagnosis.collectors.slurm.output import read_job_output

ME = os.geteuid()
BOT = ME + 4242  # a bot running as some other uid than the job's user


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def test_the_job_users_own_output_file_is_read_up_to_its_tail(tmp_path: Path) -> None:
    output = _write(tmp_path / "slurm-42.out", "start\n" + "x" * 5000 + "\nNCCL WARN timeout\n")
    text, note = read_job_output(path=str(output), job_id="42", job_uid=ME, max_bytes=100, bot_uid=BOT)
    assert text.endswith("NCCL WARN timeout\n") and len(text) == 100
    assert "last 100 of" in note


def test_the_job_id_pattern_in_the_path_is_expanded(tmp_path: Path) -> None:
    _write(tmp_path / "train-77.out", "done\n")
    text, _note = read_job_output(
        path=str(tmp_path / "train-%j.out"), job_id="77", job_uid=ME, max_bytes=1000, bot_uid=BOT
    )
    assert text == "done\n"


def test_a_file_of_another_user_is_not_read(tmp_path: Path) -> None:
    output = _write(tmp_path / "victim.out", "victim's secrets\n")
    text, note = read_job_output(path=str(output), job_id="42", job_uid=ME + 1, max_bytes=1000, bot_uid=BOT)
    assert text == "" and "does not belong to the job's user" in note


def test_a_file_of_the_bot_is_not_read_for_a_job_of_someone_else(tmp_path: Path) -> None:
    kubeconfig = _write(tmp_path / "kubeconfig", "client-key-data: c2VjcmV0\n")
    text, note = read_job_output(path=str(kubeconfig), job_id="42", job_uid=ME + 1, max_bytes=1000, bot_uid=ME)
    assert text == "" and "belongs to the bot" in note


def test_the_bots_own_file_is_read_only_when_the_job_runs_as_the_bot(tmp_path: Path) -> None:
    output = _write(tmp_path / "slurm-1.out", "ok\n")
    text, _note = read_job_output(path=str(output), job_id="1", job_uid=ME, max_bytes=1000, bot_uid=ME)
    assert text == "ok\n"


def test_a_symbolic_link_is_not_followed_even_to_the_users_own_file(tmp_path: Path) -> None:
    target = _write(tmp_path / "real.out", "real\n")
    link = tmp_path / "slurm-42.out"
    link.symlink_to(target)
    text, note = read_job_output(path=str(link), job_id="42", job_uid=ME, max_bytes=1000, bot_uid=BOT)
    assert text == "" and "symbolic link" in note


def test_proc_files_are_never_read_even_when_their_owner_matches() -> None:
    text, note = read_job_output(path="/proc/self/environ", job_id="42", job_uid=ME, max_bytes=1000, bot_uid=BOT)
    assert text == "" and "not read" in note


def test_a_directory_through_which_proc_is_reached_does_not_help(tmp_path: Path) -> None:
    (tmp_path / "me").symlink_to("/proc/self")
    text, note = read_job_output(
        path=str(tmp_path / "me" / "environ"), job_id="42", job_uid=ME, max_bytes=1000, bot_uid=BOT
    )
    assert text == "" and "pseudo-filesystem" in note


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "slurm-42.out"
    os.mkfifo(fifo)
    text, note = read_job_output(path=str(fifo), job_id="42", job_uid=ME, max_bytes=1000, bot_uid=BOT)
    assert text == "" and "not a regular file" in note


def test_a_directory_or_a_device_is_refused(tmp_path: Path) -> None:
    for path in (str(tmp_path), "/dev/zero"):
        text, note = read_job_output(path=path, job_id="42", job_uid=ME, max_bytes=1000, bot_uid=BOT)
        assert text == "" and "not a regular file" in note, path


@pytest.mark.parametrize("path", ["slurm-42.out", "../etc/passwd", "/tmp/a\x00b"])
def test_a_path_that_is_not_absolute_is_refused(path: str) -> None:
    text, note = read_job_output(path=path, job_id="42", job_uid=ME, max_bytes=1000, bot_uid=BOT)
    assert text == "" and "absolute path" in note


def test_nothing_is_read_when_the_jobs_user_is_unknown(tmp_path: Path) -> None:
    output = _write(tmp_path / "slurm-42.out", "text\n")
    text, note = read_job_output(path=str(output), job_id="42", job_uid=None, max_bytes=1000, bot_uid=BOT)
    assert text == "" and "unknown" in note


def test_a_hostile_job_id_never_reaches_the_path(tmp_path: Path) -> None:
    text, note = read_job_output(
        path=str(tmp_path / "x-%j"), job_id="../../etc/passwd", job_uid=ME, max_bytes=1000, bot_uid=BOT
    )
    assert text == "" and "invalid job id" in note


def test_an_empty_or_null_output_path_says_there_is_none() -> None:
    for path in (None, "", "/dev/null"):
        assert read_job_output(path=path, job_id="42", job_uid=ME, max_bytes=10, bot_uid=BOT) == (
            "",
            "job output: no StdOut file",
        )


@pytest.mark.skipif(ME != 0, reason="changing a file's owner needs root")
def test_as_root_another_users_file_is_read_only_for_that_users_job(tmp_path: Path) -> None:
    output = _write(tmp_path / "alice.out", "alice's output\n")
    os.chown(output, 4001, 4001)
    assert read_job_output(path=str(output), job_id="9", job_uid=4001, max_bytes=1000)[0] == "alice's output\n"
    text, note = read_job_output(path=str(output), job_id="9", job_uid=4002, max_bytes=1000)
    assert text == "" and "does not belong" in note


def _job_line(*, user: str, stdout: Path) -> str:
    from tests.bot.diagnosis.collectors.test_slurm_finished_states import FAILED_LINE

    return FAILED_LINE.replace("UserId=root(0)", f"UserId={user}").replace("StdOut=/dev/null", f"StdOut={stdout}")


def _snapshot_of(line: str) -> tuple[list, list]:
    from bot.config import SnapshotBounds
    from bot.diagnosis.collectors.slurm import collector as slurm
    from tests.bot.diagnosis.collectors.test_slurm_finished_states import RecordedBackend

    backend = RecordedBackend(job_line=line)
    backend.name = "cli"  # the output file is read on the CLI backend's host
    reports, observations, _ = slurm.collect_slurm_job(job_id="56", bounds=SnapshotBounds(), backend=backend)
    return reports, observations


def test_the_snapshot_reads_the_output_of_a_job_whose_user_owns_the_file(tmp_path: Path) -> None:
    output = tmp_path / "slurm-56.out"
    output.write_text("step 1\nNCCL WARN NET/IB : Got completion from peer 10.0.0.7<4001> with error 12\n")
    owner = output.stat().st_uid
    _, observations = _snapshot_of(_job_line(user=f"me({owner})", stdout=output))
    (tail,) = [item for item in observations if item.kind == "log_tail"]
    assert "Got completion" in tail.text


def test_the_snapshot_refuses_an_output_path_owned_by_someone_else(tmp_path: Path) -> None:
    secret = tmp_path / "kubeconfig"
    secret.write_text("client-key-data: c2VjcmV0\n")
    stranger = secret.stat().st_uid + 4242  # the job's user is not the file's owner
    reports, observations = _snapshot_of(_job_line(user=f"mallory({stranger})", stdout=secret))
    assert [item for item in observations if item.kind == "log_tail"] == []
    output = next(report for report in reports if report.name == "slurm.output")
    assert output.outcome.value == "skipped" and "c2VjcmV0" not in output.detail


def test_the_job_record_gives_the_users_uid() -> None:
    from bot.diagnosis.collectors.slurm import cli as slurm_cli
    from tests.bot.diagnosis.collectors.test_slurm_finished_states import FAILED_LINE

    assert slurm_cli.job_from_scontrol(FAILED_LINE).uid == 0
    assert slurm_cli.job_from_scontrol(FAILED_LINE.replace("UserId=root(0)", "UserId=alice")).uid is None
