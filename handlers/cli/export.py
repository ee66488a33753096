"""`triage-bot export`: an incident's postmortem or handoff (Markdown or JSON) and its evidence bundle."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated

import typer

from bot.changes.prevention import PreventionService
from bot.changes.service import ChangeService
from bot.config import load_settings
from bot.evidence.text import printable
from bot.incidents.service import IncidentError
from bot.records import build as records
from bot.records import bundle
from bot.records.sources import load_incident_data
from bot.schedule.store import TaskStore
from storage import db


class ExportFormat(enum.StrEnum):
    """What the terminal gets."""

    MD = "md"
    JSON = "json"


class RecordKind(enum.StrEnum):
    """Which record."""

    POSTMORTEM = "postmortem"
    HANDOFF = "handoff"


def register(app: typer.Typer) -> None:
    """Attach `export`."""

    @app.command("export")
    def export(
        incident_key: Annotated[str, typer.Argument(help="The incident key, e.g. INC-0042.")],
        output_format: Annotated[ExportFormat, typer.Option("--format", help="md or json.")] = ExportFormat.MD,
        record: Annotated[
            RecordKind, typer.Option("--record", help="postmortem or handoff.")
        ] = RecordKind.POSTMORTEM,
        bundle_path: Annotated[
            Path | None, typer.Option("--bundle", help="Also write the evidence bundle (tar.gz) to this path.")
        ] = None,
        database_url: Annotated[
            str | None, typer.Option("--database-url", help="Defaults to DATABASE_URL.")
        ] = None,
    ) -> None:
        """Print an incident's postmortem (or handoff) as Markdown or JSON; --bundle writes the evidence tar.gz."""
        settings = load_settings(**({"DATABASE_URL": database_url} if database_url else {}))
        engine = db.make_engine(url=settings.database_url)
        try:
            data = load_incident_data(
                engine=engine,
                incident_key=incident_key,
                changes=ChangeService(engine=engine),
                prevention=PreventionService(engine=engine),
                tasks=TaskStore(engine=engine),
            )
        except IncidentError as error:
            typer.echo(str(error), err=True)
            raise typer.Exit(code=2) from None
        finally:
            engine.dispose()
        if record is RecordKind.HANDOFF:
            handoff = records.build_handoff(data=data)
            text, exported = records.render_handoff(record=handoff), handoff.to_dict()
        else:
            postmortem = records.build_postmortem(data=data)
            text, exported = records.render_postmortem(record=postmortem), postmortem.to_dict()
        if output_format is ExportFormat.JSON:
            text = json.dumps(exported, indent=2, sort_keys=True) + "\n"
        typer.echo(printable(text), nl=False)  # workload and user text hold no terminal escapes
        if bundle_path is not None:
            names = bundle.write_bundle(data=data, path=bundle_path)
            typer.echo(f"Wrote {bundle_path} ({len(names)} files)", err=True)
