"""The dispatcher: `--help` reads only its table, an unknown command is refused by name, and a command
leaves the objects its imports built frozen for the interpreter's exit."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from handlers.main import main


def test_help_lists_every_command_without_importing_any_of_them() -> None:
    script = ("import sys; from handlers.main import main\ntry:\n main(['--help'])\nexcept SystemExit: pass\n"
              "print(sorted(m for m in sys.modules if m.startswith(('typer', 'kubernetes', 'sqlalchemy'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert "triage" in done.stdout and "classify" in done.stdout
    assert done.stdout.strip().endswith("[]"), done.stdout[-300:]


def test_an_unknown_command_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["nope"])
    assert exited.value.code == 2 and "no such command 'nope'" in capsys.readouterr().err


def test_a_command_freezes_what_its_imports_built_so_the_exit_does_not_collect_it() -> None:
    gc.unfreeze()
    with pytest.raises(SystemExit):
        main(["version"])
    try:
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
