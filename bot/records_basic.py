"""Render an incident's handoff and postmortem Markdown from templates/ (one swappable function)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from bot import records
from bot.changes import ChangeService
from bot.incidents import IncidentService
from bot.jobs import JobStore
from bot.prevention import PreventionService
from bot.record_sources import load_incident_data

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
RECORD_KINDS = ("handoff", "postmortem")


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def record_context(*, service: IncidentService, incident_key: str) -> dict[str, Any]:
    """Everything a record template may use: the incident, its timeline and its snapshot reports."""
    incident = service.get(incident_key=incident_key)
    return {
        "incident": incident,
        "timeline": service.timeline(incident_key),
        "snapshots": service.snapshots(incident_key=incident_key),
    }


def render_markdown(*, kind: str, service: IncidentService, incident_key: str) -> str:
    """`kind` is handoff or postmortem; the records area (bot/records.py) assembles and renders it."""
    if kind not in RECORD_KINDS:
        raise ValueError(f"unknown record kind {kind!r}; use one of {RECORD_KINDS}")
    from bot import records
    from bot.changes import ChangeService
    from bot.jobs import JobStore
    from bot.prevention import PreventionService
    from bot.record_sources import load_incident_data

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
