"""Write an incident's handoff and postmortem Markdown files (the demo and the terminal use this)."""

from __future__ import annotations

from pathlib import Path

from bot import records
from bot.changes import ChangeService
from bot.incidents import IncidentService
from bot.jobs import JobStore
from bot.prevention import PreventionService
from bot.record_sources import load_incident_data

RECORD_KINDS = ("handoff", "postmortem")


def render_markdown(*, kind: str, service: IncidentService, incident_key: str) -> str:
    """`kind` is handoff or postmortem; the records area (bot/records.py) assembles and renders it."""
    if kind not in RECORD_KINDS:
        raise ValueError(f"unknown record kind {kind!r}; use one of {RECORD_KINDS}")
    data = load_incident_data(
        engine=service.engine, incident_key=incident_key, changes=ChangeService(engine=service.engine),
        prevention=PreventionService(engine=service.engine), jobs=JobStore(engine=service.engine),
    )
    if kind == "handoff":
        return records.render_handoff(record=records.build_handoff(data=data))
    return records.render_postmortem(record=records.build_postmortem(data=data))


def write_records(*, service: IncidentService, incident_key: str, out_dir: Path) -> list[Path]:
    """Write `<key>-handoff.md` and `<key>-postmortem.md` into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in RECORD_KINDS:
        path = out_dir / f"{incident_key}-{kind}.md"
        path.write_text(
            render_markdown(kind=kind, service=service, incident_key=incident_key), encoding="utf-8"
        )
        written.append(path)
    return written
