"""The evidence bundle: one tar.gz with which another engineer can replay the diagnosis."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.changes import charts
from bot.evidence.findings import _plain, utcnow
from bot.records import build as records


def _add(archive: tarfile.TarFile, *, name: str, content: bytes, mtime: datetime) -> None:
    info = tarfile.TarInfo(name=name)
    info.size = len(content)
    info.mtime = int(mtime.timestamp())
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(content))


def _json(value: Any) -> bytes:
    return (json.dumps(_plain(value), indent=2, sort_keys=True, default=str) + "\n").encode()


def chart_files(*, data: records.IncidentData) -> dict[str, bytes]:
    """Every change's chart, keyed by the path the postmortem links to."""
    return {
        records.chart_filename(key=data.key, change_id=change.id): charts.change_chart_png(change=change)
        for change in data.changes
        if change.measurements
    }


def write_bundle(*, data: records.IncidentData, path: Path, now: datetime | None = None) -> list[str]:
    """Write snapshots, commands with output excerpts and timestamps, records and charts; return member names."""
    moment = now or utcnow()
    prefix = f"{data.key}-evidence"
    handoff = records.build_handoff(data=data, now=moment)
    postmortem = records.build_postmortem(data=data, now=moment)
    members: dict[str, bytes] = {
        "handoff.md": records.render_handoff(record=handoff).encode(),
        "postmortem.md": records.render_postmortem(record=postmortem).encode(),
        "handoff.json": _json(handoff.to_dict()),
        "postmortem.json": _json(postmortem.to_dict()),
        "timeline.json": _json(list(data.timeline)),
        "commands.jsonl": b"".join(
            (json.dumps(_plain(entry), sort_keys=True) + "\n").encode()
            for entry in records.evidence_commands(snapshots=data.snapshots)
        ),
        "changes.json": _json(list(data.changes)),
        "prevention.json": _json(list(data.prevention)),
        "validations.json": _json(list(data.validations)),
    }
    for index, snapshot in enumerate(data.snapshots, start=1):
        stamp = str(snapshot.get("taken_at", "")).replace(":", "").replace("-", "")
        members[f"snapshots/{index:02d}-{stamp}.json"] = _json(dict(snapshot))
    members.update(chart_files(data=data))
    manifest = {
        "incident": data.key,
        "target": data.target,
        "cluster": data.cluster,
        "generated_at": moment,
        "files": sorted(members),
        "how_to_replay": "Run each command in commands.jsonl against the target; compare with its excerpt "
        "and the snapshot JSON taken at the same timestamp.",
    }
    members["manifest.json"] = _json(manifest)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with tarfile.open(partial, "w:gz") as archive:
        for name in sorted(members):
            _add(archive, name=f"{prefix}/{name}", content=members[name], mtime=moment)
    partial.replace(path)  # never leave a half-written bundle under the real name
    return [f"{prefix}/{name}" for name in sorted(members)]
