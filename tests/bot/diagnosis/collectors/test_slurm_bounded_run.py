"""The bounded runner every CLI collector uses: argv only, a time cap and a byte cap that really stop work."""

from __future__ import annotations

import sys

import pytest

from bot.diagnosis.collectors.bounded_run import run_bounded


def test_output_beyond_the_byte_cap_is_cut_and_the_process_stopped() -> None:
    result = run_bounded(
        argv=[sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"],
        timeout_seconds=20,
        max_bytes=10_000,
    )
    assert result.truncated
    assert len(result.stdout) == 10_000
    assert not result.ok


def test_a_command_past_its_time_cap_is_killed_and_says_so() -> None:
    result = run_bounded(
        argv=[sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"],
        timeout_seconds=0.5,
        max_bytes=1000,
    )
    assert result.timed_out
    assert result.returncode is None
    assert result.stdout.startswith("started")


def test_a_missing_tool_is_reported_not_raised() -> None:
    result = run_bounded(
        argv=["scontrol-that-does-not-exist", "show", "job", "1"], timeout_seconds=1, max_bytes=100
    )
    assert result.missing and not result.ok
    assert "not found" in result.stderr


def test_shell_syntax_in_an_argument_stays_a_literal_argument() -> None:
    result = run_bounded(
        argv=[sys.executable, "-c", "import sys; print(sys.argv[1])", "1; touch /tmp/pwned"],
        timeout_seconds=10,
        max_bytes=1000,
    )
    assert result.stdout.strip() == "1; touch /tmp/pwned"


def test_an_empty_argv_is_refused() -> None:
    with pytest.raises(ValueError, match="argv"):
        run_bounded(argv=[], timeout_seconds=1, max_bytes=10)
