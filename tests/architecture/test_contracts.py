"""The layout's rules (pyproject.toml [tool.importlinter]) hold: run by CI before the tests, and here so the README's
test command proves them too."""

import shutil
import subprocess

from tests.support.paths import ROOT


def test_every_import_contract_is_kept() -> None:
    command = shutil.which("lint-imports")
    assert command is not None, "import-linter is part of the test extra: pip install -e '.[test]'"
    result = subprocess.run(
        [command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout
    for contract in (
        "The Slack and terminal edges are independent",
        "Only collectors and the lab talk to clusters (kubernetes, requests, subprocess)",
        "The classifier is independent of the collectors",
        "Storage imports nothing of ours",
        "The core reaches the database only through storage (no SQL built in bot)",
    ):
        assert f"{contract} KEPT" in result.stdout
