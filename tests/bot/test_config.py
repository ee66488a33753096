"""Settings come from the caller, then the process's variables, then a `.env` file, then defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.config import Settings, SnapshotBounds, load_settings


@pytest.fixture(autouse=True)
def _in_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("PORT", "SLACK_BOT_TOKEN", "TRIAGE_SNAPSHOT_DEADLINE_SECONDS", "KUBECONFIG", "TRIAGE_IN_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_a_variable_fills_its_field_by_alias_whatever_its_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("port", "4100")
    monkeypatch.setenv("TRIAGE_IN_CLUSTER", "true")
    settings = load_settings()
    assert settings.port == 4100 and settings.in_cluster is True


def test_snapshot_bounds_read_their_prefixed_variables_also_as_the_settings_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAGE_SNAPSHOT_DEADLINE_SECONDS", "7.5")
    assert SnapshotBounds().deadline_seconds == 7.5
    assert load_settings().bounds.deadline_seconds == 7.5


def test_the_env_file_is_read_and_a_process_variable_wins_over_it(
        _in_empty_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (_in_empty_folder / ".env").write_text('export SLACK_BOT_TOKEN="xoxb-from-file"\n# a comment\nPORT=4000\n',
                                           encoding="utf-8")
    monkeypatch.setenv("PORT", "5000")
    settings = load_settings()
    assert settings.slack_bot_token == "xoxb-from-file"
    assert settings.port == 5000


def test_what_the_caller_passes_wins_by_field_name_or_by_variable_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    assert load_settings(KUBECONFIG="/by/alias").kubeconfig == Path("/by/alias")
    assert Settings(kubeconfig=Path("/by/name")).kubeconfig == Path("/by/name")
    assert load_settings().kubeconfig == Path("/from/env")


def test_a_secret_of_spaces_is_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "   ")
    assert load_settings().slack_bot_token is None


def test_a_bad_value_names_the_variable_and_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIAGE_SNAPSHOT_DEADLINE_SECONDS", "0")
    with pytest.raises(ValidationError, match="deadline_seconds"):
        load_settings()
