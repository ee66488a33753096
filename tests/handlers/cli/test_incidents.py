"""The `triage-bot` terminal commands, run as a user would run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from handlers.slack.app import BOT_SCOPES
from handlers.slack.manifest import manifest_yaml
from tests.support.paths import ROOT


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", **(env or {})}
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "DATABASE_URL"):
        environment.pop(name, None) if not env or name not in env else None
    return subprocess.run(
        [sys.executable, "-c", "from handlers.main import main; main()", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_demo_plays_an_incident_and_writes_its_handoff_and_postmortem(tmp_path: Path) -> None:
    result = _cli("demo", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    handoff = tmp_path / "out" / "INC-0001-handoff.md"
    postmortem = tmp_path / "out" / "INC-0001-postmortem.md"
    assert "## Changes and rollback" in handoff.read_text(encoding="utf-8")
    assert "rollback: re-apply revision 41" in handoff.read_text(encoding="utf-8")
    assert "## Prevention actions" in postmortem.read_text(encoding="utf-8")
    assert "INC-0001: ml/train-llama" in result.stdout or "INC-0001" in result.stdout
    assert "set INC-0001 to *resolved*" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_help_lists_every_subcommand_on_one_line(tmp_path: Path) -> None:
    result = _cli("--help", cwd=tmp_path)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    for name in ("demo", "serve", "manifest", "db"):
        matching = [line for line in lines if line.strip("│ ").startswith(name + " ")]
        assert len(matching) == 1, (name, result.stdout)


def test_db_upgrade_migrates_the_configured_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    result = _cli("db", "upgrade", cwd=tmp_path, env={"DATABASE_URL": url})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "x.db").exists()


def test_serve_without_tokens_says_what_to_set(tmp_path: Path) -> None:
    result = _cli("serve", cwd=tmp_path)
    assert result.returncode == 2
    assert "SLACK_BOT_TOKEN" in result.stderr and "triage-bot manifest" in result.stderr


def test_the_manifest_declares_the_command_scopes_and_interactivity() -> None:
    data = yaml.safe_load(manifest_yaml(base_url="https://bot.example.org", socket_mode=False))
    (command,) = data["features"]["slash_commands"]
    assert command["command"] == "/triage" and command["should_escape"] is True
    assert command["url"] == "https://bot.example.org/slack/events"
    assert data["oauth_config"]["scopes"]["bot"] == BOT_SCOPES
    assert data["settings"]["interactivity"] == {
        "is_enabled": True,
        "request_url": "https://bot.example.org/slack/events",
    }
    assert len(command["description"]) <= 100


def test_the_socket_mode_manifest_has_no_request_urls() -> None:
    data = yaml.safe_load(manifest_yaml(base_url=None, socket_mode=True))
    assert data["settings"]["socket_mode_enabled"] is True
    assert "url" not in data["features"]["slash_commands"][0]
    assert "request_url" not in data["settings"]["interactivity"]
