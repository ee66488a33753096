"""`triage-bot`: one dispatcher; each command's module is imported only when that command runs.

Start-up is part of every command's latency (`triage-bot --help` must not pay for SQLAlchemy, Bolt or the
Kubernetes client), so the table below names each command's module and one-line help; `--help` reads only
the table, and a command imports its own module (and typer) when it runs.
"""

from __future__ import annotations

import gc
import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

PROG = "triage-bot"
SUMMARY = "Slack incident bot for AI/GPU clusters: bounded snapshots classified by layer, and the record."

# name -> (module with `register(typer_app)`, one-line help shown by `triage-bot --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("handlers.slack.demo", "Play one whole incident locally; write its handoff and postmortem."),
    "serve": ("handlers.slack.serve", "Run the Slack bot (HTTP, or Socket Mode with SLACK_APP_TOKEN)."),
    "manifest": ("handlers.slack.manifest", "Print the Slack app manifest (YAML) to create the app."),
    "triage": ("handlers.cli.triage", "Bounded diagnostic snapshots of one workload, Slurm job or node."),
    "classify": ("handlers.cli.classify", "Classify stdin lines: rules, then the learned model (`classify train` rebuilds it)."),
    "fabric": ("handlers.cli.fabric", "NCCL/InfiniBand scope from logs, and opt-in bounded fabric probes."),
    "clusters": ("handlers.cli.clusters", "Named clusters: reachability and what the bot may read there."),
    "export": ("handlers.cli.export", "Print an incident's postmortem or handoff; write its evidence bundle."),
    "lab": ("handlers.cli.lab", "Simulated clusters for the demo, practice and tests."),
    "db": ("handlers.cli.db", "Database schema migrations (db upgrade)."),
    "version": ("handlers.cli.version", "Print the installed version."),
}


def usage() -> str:
    """`triage-bot --help`, from the table alone."""
    width = max(len(name) for name in COMMANDS)
    lines = [f"Usage: {PROG} COMMAND [ARGS]...", "", SUMMARY, "", "Commands:"]
    lines += [f"  {name:<{width}}  {help_text}" for name, (_module, help_text) in COMMANDS.items()]
    lines += ["", f"`{PROG} COMMAND --help` describes one command."]
    return "\n".join(lines) + "\n"


def typer_app(*names: str) -> typer.Typer:
    """A typer app with the named commands (all of them when none are named): for tests and docs."""
    import typer

    app = typer.Typer(name=PROG, help=SUMMARY, add_completion=False, no_args_is_help=True)
    for name in names or tuple(COMMANDS):
        importlib.import_module(COMMANDS[name][0]).register(app)
    return app


def _command(name: str) -> Any:
    """The click command (typer underneath) for one top-level name, importing only its module."""
    import typer

    built = typer.main.get_command(typer_app(name))
    if hasattr(built, "commands") and name in built.commands:
        return built.commands[name]
    return built


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        raise SystemExit(0 if args else 2)
    name = args[0]
    if name not in COMMANDS:
        sys.stderr.write(f"{PROG}: no such command {name!r}.\n\n{usage()}")
        raise SystemExit(2)
    try:
        _command(name).main(args=args[1:], prog_name=f"{PROG} {name}")
    finally:
        # The process ends here. Freezing moves every object the imports built (pydantic schemas, client and
        # rule tables) out of the collector's sight, so the interpreter's final collection does not walk them:
        # about 60 ms of a one-shot command's exit on a 2-core VM (bench/bench_startup.py).
        gc.freeze()
