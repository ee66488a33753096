"""`triage-bot triage job <id>` and `triage node <name>`: one bounded snapshot from the terminal, as text, JSON or
Markdown."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from bot.diagnosis import compare as compare_mod
    from bot.evidence.report import SnapshotReport
    from bot.evidence.targets import Target

EXIT_OK, EXIT_BAD_INPUT, EXIT_NOT_FOUND, EXIT_UNREACHABLE = 0, 2, 3, 4


class OutputFormat(enum.StrEnum):
    """How `triage job` prints its report."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


def _fail(message: str, *, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=code)


def _snapshot(*, raw: str, settings: Any, prefer: str | None = None) -> SnapshotReport:
    """One snapshot; `prefer` is the cluster an id without `<cluster>:` means (the failing one's, for --compare)."""
    from bot.clusters.registry import Clusters
    from bot.evidence.targets import InvalidTarget, parse_target

    try:
        clusters = Clusters.from_settings(settings)
        target = clusters.resolve(parse_target(raw), prefer=prefer)
    except (InvalidTarget, ValueError) as exc:
        raise _fail(str(exc), code=EXIT_BAD_INPUT) from None
    return _diagnose(target=target, settings=settings, clusters=clusters)


def _diagnose(*, target: Target, settings: Any, clusters: Any = None) -> SnapshotReport:
    from bot.diagnosis import service as diagnose_mod
    from bot.evidence.node_targets import NodeTarget
    from bot.evidence.report import SnapshotUnavailable
    from bot.evidence.targets import Platform

    try:
        return diagnose_mod.diagnose(target=target, settings=settings, clusters=clusters)
    except diagnose_mod.TargetNotFound as exc:
        if isinstance(target, NodeTarget):
            hint = ("List the nodes with `sinfo -N`." if target.platform is Platform.SLURM else
                    "List the nodes with `kubectl get nodes`.")
        elif target.platform is Platform.SLURM:
            hint = f"Check the job id with `squeue -j {target.name}` or `sacct -j {target.name}`."
        else:
            hint = (f"Check the namespace and name with `kubectl get all -n {target.namespace}` "
                    f"(or `kubectl api-resources` for the kind's name).")
        raise _fail(f"{exc}. {hint}", code=EXIT_NOT_FOUND) from None
    except diagnose_mod.ClusterUnreachable as exc:
        raise _fail(f"cluster unreachable: {exc}. Check --kubeconfig/--context (or the cluster's entry in "
                    "TRIAGE_CLUSTERS_FILE; `triage-bot clusters` checks every one) and that the API server answers.",
                    code=EXIT_UNREACHABLE) from None
    except SnapshotUnavailable as exc:
        raise _fail(str(exc), code=EXIT_UNREACHABLE) from None


def render_text(console: Console, report: SnapshotReport, differences: list[compare_mod.Difference] | None) -> None:
    """The report for a terminal, with rich tables."""
    from rich.table import Table

    from handlers.render.markdown import no_current_failure

    verdict = report.verdict
    layer = ("no current failure" if no_current_failure(verdict) else
             verdict.layer.value if verdict.layer else "undetermined")
    console.print(f"[bold]{report.target}[/bold] ({report.target_kind or 'unknown kind'}) — verdict: "
                  f"[bold]{layer}[/bold] (confidence {verdict.confidence:.2f})", highlight=False)
    console.print(verdict.summary, highlight=False, markup=False)
    for finding in report.findings:
        history = "" if finding.current else " (history)"
        console.print(f"\n[bold]{finding.severity.value.upper()}[/bold]{history} "
                      f"{finding.layer.value if finding.layer else '-'} {finding.rule}: ", highlight=False, end="")
        console.print(finding.summary, highlight=False, markup=False)
        for evidence in finding.evidence:
            console.print(f"  $ {evidence.command}\n    {evidence.excerpt[:300]}", highlight=False, markup=False)
        console.print(f"  next: {finding.next_step}", highlight=False, markup=False)
    if differences:
        table = Table(title="Differs from the healthy run")
        for column in ("category", "key", "failing", "healthy"):
            table.add_column(column)
        for item in differences:
            table.add_row(item.category, item.key, item.failing, item.healthy)
        console.print(table)
    table = Table(title="Collectors")
    for column in ("collector", "outcome", "items", "ms", "detail"):
        table.add_column(column)
    for item in report.collectors:
        table.add_row(item.name, item.outcome.value + (" (truncated)" if item.truncated else ""), str(item.items),
                      str(item.elapsed_ms), item.detail)
    console.print(table)
    for line in report.followed:
        console.print(f"followed: {line}", highlight=False, markup=False)
    console.print(f"snapshot: {report.elapsed_ms} ms", highlight=False)


def register(app: typer.Typer) -> None:
    """Attach the `triage` group."""
    triage = typer.Typer(help="Bounded diagnostic snapshots of one workload.", no_args_is_help=True)

    @triage.command("job")
    def job(
        job_id: Annotated[str, typer.Argument(help="namespace/name, kind/namespace/name (deployment, statefulset, "
                                                  "cronjob, pod, rayjob, inferenceservice, lws, ...), "
                                                  "plural.group/namespace/name, or a Slurm job number; "
                                                  "`<cluster>:` in front names the cluster")],
        kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig file (default: $KUBECONFIG)")] = None,
        context: Annotated[str | None, typer.Option(help="kubeconfig context")] = None,
        deadline: Annotated[float | None, typer.Option(help="global snapshot deadline in seconds")] = None,
        output: Annotated[OutputFormat, typer.Option("--format", help="text, json or markdown")] = OutputFormat.TEXT,
        compare: Annotated[str | None, typer.Option(help="a healthy workload id to diff against")] = None,
    ) -> None:
        """Take a bounded snapshot of one workload, classify it, and print the report."""
        settings = _settings(kubeconfig=kubeconfig, context=context, deadline=deadline)
        report = _snapshot(raw=job_id, settings=settings)
        differences = None
        if compare:
            healthy = _snapshot(raw=compare, settings=settings, prefer=report.cluster or None)
            from bot.diagnosis import compare as compare_mod

            differences = compare_mod.compare_snapshots(failing=report, healthy=healthy)
        _print(report, differences=differences, compare=compare, output=output)

    @triage.command("node")
    def node(
        name: Annotated[str, typer.Argument(help="a Kubernetes node name (or node:<name>), or slurm:<name>")],
        kubeconfig: Annotated[Path | None, typer.Option(help="kubeconfig file (default: $KUBECONFIG)")] = None,
        context: Annotated[str | None, typer.Option(help="kubeconfig context")] = None,
        deadline: Annotated[float | None, typer.Option(help="global snapshot deadline in seconds")] = None,
        output: Annotated[OutputFormat, typer.Option("--format", help="text, json or markdown")] = OutputFormat.TEXT,
    ) -> None:
        """Is this node bad? Conditions, taints, GPUs, Xid/ECC/NVLink, GPU stack pods, who runs on it, next steps."""
        from bot.evidence.node_targets import parse_node_target
        from bot.evidence.targets import InvalidTarget

        settings = _settings(kubeconfig=kubeconfig, context=context, deadline=deadline)
        try:
            target = parse_node_target(name)
        except InvalidTarget as exc:
            raise _fail(str(exc), code=EXIT_BAD_INPUT) from None
        _print(_diagnose(target=target, settings=settings), differences=None, compare=None, output=output)

    app.add_typer(triage, name="triage")


def _settings(*, kubeconfig: Path | None, context: str | None, deadline: float | None) -> Any:
    """The environment's settings with the command-line overrides, checked first."""
    if deadline is not None and not 0 < deadline <= 600:
        raise _fail("--deadline must be between 0 and 600 seconds", code=EXIT_BAD_INPUT)
    if kubeconfig is not None and not kubeconfig.is_file():
        raise _fail(f"--kubeconfig {kubeconfig} is not a readable file", code=EXIT_BAD_INPUT)
    from bot.config import load_settings

    settings = load_settings()
    updates: dict[str, Any] = {}
    if kubeconfig is not None:
        updates["kubeconfig"] = kubeconfig
    if context is not None:
        updates["kube_context"] = context
    if deadline is not None:
        updates["bounds"] = settings.bounds.model_copy(update={"deadline_seconds": deadline})
    return settings.model_copy(update=updates)


def _print(report: SnapshotReport, *, differences: list[compare_mod.Difference] | None, compare: str | None,
           output: OutputFormat) -> None:
    if output is OutputFormat.JSON:
        data = report.to_dict()
        if differences is not None:
            data["compare"] = {"healthy": compare, "differences": [d.to_dict() for d in differences]}
        typer.echo(json.dumps(data, indent=2))
    elif output is OutputFormat.MARKDOWN:
        from handlers.render.markdown import render_markdown

        typer.echo(render_markdown(snapshot=report, differences=differences), nl=False)
    else:
        from rich.console import Console

        render_text(Console(), report, differences)
