"""`triage-bot clusters`: every named cluster, whether it answers, and what the bot may read there (asked of
each API server with SelfSubjectAccessReview/SelfSubjectRulesReview; Slurm's ping and PrivateData)."""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from bot.diagnosis.reach import ClusterStatus

EXIT_OK, EXIT_BAD_CONFIG, EXIT_SOME_UNREACHABLE = 0, 2, 4


class OutputFormat(enum.StrEnum):
    """How `clusters` prints."""

    TEXT = "text"
    JSON = "json"


def render_text(statuses: list[ClusterStatus], *, source: str) -> None:
    """One table row per cluster, then what each may not read."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, Console().width))
    table = Table(title=f"Clusters ({source})")
    for column in ("name", "kind", "access", "reachable", "version", "may read"):
        table.add_column(column, overflow="fold")
    for item in statuses:
        if item.permissions:
            readable = f"{len(item.readable)}/{len(item.permissions)} reads"
            if any(entry["namespace_only"] for entry in item.permissions):
                readable += f" (some only in {item.rules_namespace})"
        else:
            readable = "; ".join(item.notes) or "-"
        table.add_row(item.name + (" (default)" if item.default else ""), item.platform, item.access,
                      "yes" if item.reachable else "NO", item.version or "-", readable)
    console.print(table)
    for item in statuses:
        if not item.reachable:
            console.print(f"{item.name}: {item.detail}", highlight=False, markup=False)
        if item.refused:
            console.print(f"{item.name}: the API server refuses {', '.join(item.refused)}; snapshots there report "
                          "it as not checked.", highlight=False, markup=False)
        if item.rules_incomplete:
            console.print(f"{item.name}: the rules review in {item.rules_namespace} is incomplete (an authorizer "
                          "other than RBAC answers too); the access reviews above are authoritative.",
                          highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Attach `clusters`."""

    @app.command("clusters")
    def clusters(
        namespace: Annotated[str | None, typer.Option(help="also ask what may be read in this namespace "
                                                           "(Role-based installs)")] = None,
        timeout: Annotated[float, typer.Option(help="seconds each cluster has to answer")] = 5.0,
        output: Annotated[OutputFormat, typer.Option("--format", help="text or json")] = OutputFormat.TEXT,
    ) -> None:
        """List the named clusters with reachability and what the bot may read there."""
        if not 0 < timeout <= 60:
            typer.echo("error: --timeout must be between 0 and 60 seconds", err=True)
            raise typer.Exit(code=EXIT_BAD_CONFIG)
        from bot.clusters.registry import Clusters
        from bot.clusters.spec import ClusterConfigError
        from bot.config import load_settings
        from bot.diagnosis import reach

        settings = load_settings()
        try:
            registry = Clusters.from_settings(settings)
        except ClusterConfigError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(code=EXIT_BAD_CONFIG) from None
        statuses = reach.check_all(clusters=registry, settings=settings, timeout=timeout, namespace=namespace)
        if output is OutputFormat.JSON:
            typer.echo(json.dumps({"source": registry.source, "clusters": [item.to_dict() for item in statuses]},
                                  indent=2))
        else:
            render_text(statuses, source=registry.source)
        if not all(item.reachable for item in statuses):
            raise typer.Exit(code=EXIT_SOME_UNREACHABLE)
