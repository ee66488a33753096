"""`triage-bot fabric`: log scoping from files, and probes that refuse without --allow or a runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from handlers.cli import fabric as cli_fabric
from tests.support.paths import FIXTURES

LAB = FIXTURES / "fabric" / "lab-nccl-ib"
PUBLISHED = FIXTURES / "fabric" / "published"


@pytest.fixture
def app() -> typer.Typer:
    application = typer.Typer()
    cli_fabric.register(application)

    @application.command("noop")
    def noop() -> None:  # a second command keeps typer in group mode
        """Unused."""

    return application


def test_fabric_logs_names_the_pair_of_hosts(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["fabric", "logs", *[str(p) for p in sorted(LAB.glob("*.log"))]])
    assert result.exit_code == 0, result.output
    assert "scope: path-local" in result.output
    assert "gpu-node-03" in result.output and "gpu-node-07" in result.output


def test_fabric_logs_as_json_lists_observations(app: typer.Typer) -> None:
    result = CliRunner().invoke(
        app, ["fabric", "logs", "--json", str(PUBLISHED / "watchdog-llamafactory-7396.log")]
    )
    assert result.exit_code == 0, result.output
    kinds = [item["kind"] for item in json.loads(result.output)]
    assert kinds.count("nccl_error") == 2 and "fabric_scope" in kinds


def test_a_missing_log_file_is_a_clear_error(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["fabric", "logs", str(tmp_path / "absent.log")])
    assert result.exit_code == cli_fabric.EXIT_BAD_INPUT
    assert "not a readable file" in result.output


def test_a_bandwidth_probe_without_allow_is_refused(
    app: typer.Typer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIAGE_NODE_PROBE_RUNNER", "srun")
    result = CliRunner().invoke(
        app, ["fabric", "pair", "--server", "a", "--client", "b", "--expected-gbps", "400"]
    )
    assert result.exit_code == cli_fabric.EXIT_REFUSED
    assert "explicitly allowed" in result.output


def test_a_link_probe_with_no_runner_configured_is_refused(
    app: typer.Typer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIAGE_NODE_PROBE_RUNNER", "off")
    result = CliRunner().invoke(app, ["fabric", "links", "--node", "a", "--allow"])
    assert result.exit_code == cli_fabric.EXIT_REFUSED
    assert "TRIAGE_NODE_PROBE_RUNNER" in result.output


@pytest.mark.slurm
@pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm client tools are not installed")
def test_a_link_probe_on_a_node_without_ibstat_fails_cleanly(
    app: typer.Typer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRIAGE_NODE_PROBE_RUNNER", "srun")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no ibstat on the test node
    result = CliRunner().invoke(app, ["fabric", "links", "--node", "localhost", "--allow", "--cap", "30"])
    if shutil.which("ibstat"):
        pytest.skip("this machine has ibstat")
    assert result.exit_code == cli_fabric.EXIT_PROBE_FAILED
    assert "srun -w localhost" in result.output
