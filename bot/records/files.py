"""Write an incident's handoff and postmortem Markdown files, with the charts they link (demo, terminal)."""

from __future__ import annotations

from pathlib import Path

from bot.core import Core
from bot.records import build as records
from bot.records import bundle

RECORD_KINDS = ("handoff", "postmortem")


def render_markdown(*, kind: str, data: records.IncidentData) -> str:
    """`kind` is handoff or postmortem."""
    if kind not in RECORD_KINDS:
        raise ValueError(f"unknown record kind {kind!r}; use one of {RECORD_KINDS}")
    if kind == "handoff":
        return records.render_handoff(record=records.build_handoff(data=data))
    return records.render_postmortem(record=records.build_postmortem(data=data))


def write_records(*, core: Core, incident_key: str, out_dir: Path) -> list[Path]:
    """Write `<key>-handoff.md`, `<key>-postmortem.md` and the charts the postmortem links into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = core.incident_data(incident_key=incident_key)
    written = []
    for kind in RECORD_KINDS:
        path = out_dir / f"{incident_key}-{kind}.md"
        path.write_text(render_markdown(kind=kind, data=data), encoding="utf-8")
        written.append(path)
    for relative, png in bundle.chart_files(data=data).items():
        chart = out_dir / relative
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_bytes(png)
        written.append(chart)
    return written
