"""`triage-bot version`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach `version`."""

    @app.command("version")
    def version() -> None:
        """Print the installed version."""
        from importlib.metadata import version as installed_version

        typer.echo(installed_version("triage-bot"))
