"""The `triage-bot` command: one typer app; each area registers its subcommands from its own module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="triage-bot",
    help="Slack incident bot for AI/GPU clusters: bounded snapshots classified by layer, and the record.",
    no_args_is_help=True,
    add_completion=False,
)


def _register_all() -> None:
    """Each area module exposes `register(app)`; keeping them apart keeps modules small."""
    from handlers.cli import classify as cli_classify
    from handlers.cli import export as cli_records
    from handlers.cli import fabric as cli_fabric
    from handlers.cli import incidents as cli_incidents
    from handlers.cli import triage as cli_triage

    for module in (cli_incidents, cli_triage, cli_fabric, cli_classify, cli_records):
        module.register(app)


def main() -> None:
    """Console entry point."""
    _register_all()
    app()
