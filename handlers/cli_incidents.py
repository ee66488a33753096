"""Terminal subcommands for the incident lifecycle (demo, serve, manifest, db); filled by the foundation."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this area's subcommands."""

    @app.command("version")
    def version() -> None:
        """Print the installed version."""
        from importlib.metadata import version as installed_version  # noqa: PLC0415

        typer.echo(installed_version("triage-bot"))
