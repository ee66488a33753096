"""The arguments the chart passes to the image are ones the `triage-bot` CLI accepts."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence

import pytest

from tests.helm.chart import REPO_ROOT, Helm, parse_manifests
from tests.helm.scenarios import SCENARIOS

pytestmark = pytest.mark.helm


def _cli(*, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run the CLI the image's ENTRYPOINT runs, with `--help` last so nothing starts (click parses args first)."""
    return subprocess.run(
        [sys.executable, "-c", "from handlers.main import main; main()", *args, "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _chart_argvs(helm: Helm) -> set[tuple[str, ...]]:
    argvs: set[tuple[str, ...]] = set()
    for values in SCENARIOS.values():
        for doc in parse_manifests(text=helm.template(values=values)):
            if doc["kind"] in ("Deployment", "Job"):
                pod = doc["spec"]["template"]["spec"]
                argvs.update(tuple(c["args"]) for c in pod.get("initContainers", []) + pod["containers"])
    return argvs


def test_every_argv_the_chart_runs_is_accepted_by_the_cli(helm: Helm) -> None:
    argvs = _chart_argvs(helm)
    assert {argv[0] for argv in argvs} == {"serve", "db"}
    top_level = _cli(args=[]).stdout
    if not all(re.search(rf"\b{command}\b", top_level) for command in ("serve", "db")):
        pytest.skip("`triage-bot serve` / `db upgrade` are not registered yet (foundation branch not merged)")
    for argv in sorted(argvs):
        result = _cli(args=argv)
        assert result.returncode == 0, f"triage-bot {' '.join(argv)}: {result.stdout}{result.stderr}"


def test_the_cli_check_would_catch_an_option_the_cli_does_not_have() -> None:
    result = _cli(args=["serve", "--no-such-option"])
    assert result.returncode != 0
