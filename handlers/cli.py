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
    from handlers import cli_incidents  # noqa: PLC0415
    from handlers import cli_triage  # noqa: PLC0415

    for module in (cli_incidents, cli_triage):
        module.register(app)


def main() -> None:
    """Console entry point."""
    _register_all()
    app()
