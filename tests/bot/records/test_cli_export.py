"""`triage-bot export`: the postmortem as Markdown or JSON and the evidence bundle, from the database."""

from __future__ import annotations

import json
import tarfile
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.changes.prevention import PreventionService
from bot.changes.service import ChangeService
from bot.config import Settings
from bot.evidence.targets import parse_target
from bot.incidents.service import IncidentService
from bot.lab.demo import minimal_diagnoser
from bot.records.sources import timeline_sink
from handlers.main import typer_app
from storage import db


@pytest.fixture
def recorded_incident(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'export.db'}"
    db.upgrade(url=url)
    engine = db.make_engine(url=url)
    incidents = IncidentService(engine=engine, diagnoser=minimal_diagnoser)
    key = incidents.open_for_target(
        target=parse_target("ml/train-llama"), channel_id="C1", opened_by="U1"
    ).incident.key
    incidents.run_snapshot(incident_key=key, settings=Settings(DATABASE_URL=url), actor="U1")
    incidents.add_note(
        incident_key=key, text="root cause: tokenizer padding doubled activation memory", actor="U1"
    )
    changes = ChangeService(engine=engine, on_event=timeline_sink())
    change = changes.propose(
        incident_key=key,
        what="Batch 32 -> 16",
        variable="per-rank batch",
        expected_effect="no OOM",
        metric="steps between restarts",
        unit="steps",
        baseline=400,
        threshold=2000,
        rollback_plan="batch back to 32",
        approved_by="U2",
        proposed_by="U1",
    ).change
    changes.apply(change_id=change.id, actor="U1")
    for window, value in (("+15m", 2500), ("+60m", 2600)):
        changes.measure(change_id=change.id, window=window, value=value, unit="steps", actor="U1")
    changes.validate(change_id=change.id, actor="U1")
    PreventionService(engine=engine, on_event=timeline_sink()).add(
        incident_key=key,
        description="Pin the tokenizer",
        owner="U3",
        due_on=date(2026, 12, 15),
        guardrail_check="CI compares padded length",
        actor="U1",
    )
    engine.dispose()
    return url, key


def _export(*args: str) -> object:
    return CliRunner().invoke(typer_app(), ["export", *args], catch_exceptions=False)


def test_export_prints_the_postmortem_markdown(recorded_incident: tuple[str, str]) -> None:
    url, key = recorded_incident
    result = _export(key, "--database-url", url)
    assert result.exit_code == 0
    assert result.stdout.startswith(f"# Postmortem: {key}")
    assert "tokenizer padding doubled activation memory" in result.stdout
    assert "Validated change(s): #1 Batch 32 -> 16" in result.stdout


def test_export_json_and_the_evidence_bundle(recorded_incident: tuple[str, str], tmp_path: Path) -> None:
    url, key = recorded_incident
    out = tmp_path / "bundle.tar.gz"
    result = _export(key, "--format", "json", "--bundle", str(out), "--database-url", url)
    assert result.exit_code == 0
    exported = json.loads(result.stdout)
    assert exported["key"] == key and exported["failing_layer"] == "runtime"
    assert exported["changes"][0]["gain_repeated"] is True
    with tarfile.open(out) as archive:
        names = archive.getnames()
    assert f"{key}-evidence/commands.jsonl" in names
    assert f"{key}-evidence/charts/{key}-change-1.png" in names
    assert any(name.startswith(f"{key}-evidence/snapshots/01-") for name in names)


def test_export_of_an_unknown_incident_says_so_and_exits_2(recorded_incident: tuple[str, str]) -> None:
    url, _ = recorded_incident
    result = _export("INC-9999", "--database-url", url)
    assert result.exit_code == 2
    assert "There is no incident INC-9999" in result.stderr
