"""`triage-bot classify`: evidence lines on stdin, one layer/rule/scope/next per line (text or JSON lines)."""

from __future__ import annotations

import enum
import json
import sys
from typing import Annotated

import typer

from bot.diagnosis import classify


class OutputFormat(enum.StrEnum):
    """Human columns or JSON lines for runbooks and CI."""

    TEXT = "text"
    JSON = "json"


def render_line(*, text: str, output: OutputFormat) -> str:
    """One classified line in the chosen format; `layer` is null (or '-') when unknown."""
    result = classify.classify_line(text)
    if output is OutputFormat.JSON:
        data = result.to_dict()
        return json.dumps(
            {
                "text": text,
                "layer": data["layer"],
                "rule": data["rule"],
                "scope": data["scope"],
                "next": data["next"],
            }
        )
    layer = result.layer.value if result.layer else "-"
    scope = result.scope.value if result.scope else "-"
    return f"{layer}\t{result.rule or '-'}\t{scope}\t{result.next or '-'}"


def register(app: typer.Typer) -> None:
    """Attach the classify subcommand."""

    @app.command("classify")
    def classify_command(
        output: Annotated[
            OutputFormat, typer.Option("--format", help="text (tab-separated) or json lines")
        ] = OutputFormat.TEXT,
    ) -> None:
        """Classify evidence lines from stdin: layer, rule, scope and the next command, one per line."""
        if sys.stdin.isatty():
            typer.echo(
                "classify reads evidence lines on stdin, e.g.: kubectl get events -A | triage-bot classify",
                err=True,
            )
            raise typer.Exit(code=2)
        for raw in sys.stdin.buffer:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            typer.echo(render_line(text=line, output=output))
