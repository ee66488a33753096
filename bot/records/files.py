"""Write an incident's handoff and postmortem Markdown files (the demo and the terminal use this)."""

from __future__ import annotations

from pathlib import Path

from bot.changes.prevention import PreventionService
from bot.changes.service import ChangeService
from bot.incidents.service import IncidentService
from bot.records import build as records
from bot.records import bundle
from bot.records.sources import load_incident_data
from bot.schedule.store import JobStore

RECORD_KINDS = ("handoff", "postmortem")


def _incident_data(*, service: IncidentService, incident_key: str) -> records.IncidentData:
    return load_incident_data(
        engine=service.engine, incident_key=incident_key, changes=ChangeService(engine=service.engine),
        prevention=PreventionService(engine=service.engine), jobs=JobStore(engine=service.engine),
    )


def render_markdown(*, kind: str, service: IncidentService, incident_key: str) -> str:
    """`kind` is handoff or postmortem; the records area (bot/records/build.py) assembles and renders it."""
    if kind not in RECORD_KINDS:
        raise ValueError(f"unknown record kind {kind!r}; use one of {RECORD_KINDS}")
    data = _incident_data(service=service, incident_key=incident_key)
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
    data = _incident_data(service=service, incident_key=incident_key)
    for relative, png in bundle.chart_files(data=data).items():  # the postmortem links these paths
        chart = out_dir / relative
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_bytes(png)
        written.append(chart)
    return written
