"""Terminal surface for fabric evidence: scope NCCL logs, and the opt-in bounded probes (`triage-bot fabric`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from bot.config import load_settings
from bot.diagnosis.collectors import node_probe
from bot.diagnosis.collectors.fabric import nccl as fabric
from bot.evidence.findings import Observation, utcnow

EXIT_BAD_INPUT, EXIT_REFUSED, EXIT_PROBE_FAILED = 2, 5, 6
MAX_LOG_FILE_BYTES = 8_000_000
_FILES_HELP = "log files; a file's name (without suffix) is its host unless its NCCL lines name one"


def _fail(message: str, *, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=code)


def _read_tail(path: Path) -> str:
    """The last MAX_LOG_FILE_BYTES of one log file."""
    if not path.is_file():
        raise _fail(f"{path} is not a readable file", code=EXIT_BAD_INPUT)
    size = path.stat().st_size
    with path.open("rb") as handle:
        handle.seek(max(0, size - MAX_LOG_FILE_BYTES))
        return handle.read().decode("utf-8", "replace")


def _print(observations: list[Observation], *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([item.to_dict() for item in observations], indent=2))
        return
    console = Console()
    scope = next((item for item in observations if item.kind == "fabric_scope"), None)
    if scope is None:
        console.print("no fabric errors found in these logs", highlight=False)
        return
    console.print(f"scope: {scope.fields['scope']} — {scope.fields['reason']}", highlight=False, markup=False)
    table = Table(title="NCCL fabric events")
    for column in ("host", "type", "rank", "peer", "hca", "status", "op"):
        table.add_column(column)
    for item in observations:
        if item.kind != "nccl_error":
            continue
        fields = item.fields
        table.add_row(
            str(fields["host"]),
            str(fields["error_type"]),
            str(fields["rank"] if fields["rank"] is not None else ""),
            str(fields["peer_host"] or fields["peer"] or ""),
            str(fields["hca"] or ""),
            str(fields["status_text"] or fields["status"] or ""),
            str(fields["op_type"] or ""),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Attach the `fabric` command group."""
    group = typer.Typer(
        help="Fabric evidence: NCCL log scope and opt-in bounded link/bandwidth probes.", no_args_is_help=True
    )

    @group.command("logs")
    def logs(
        files: list[Path] = typer.Argument(..., help=_FILES_HELP),  # noqa: B008
        as_json: bool = typer.Option(False, "--json", help="print observations as JSON"),
    ) -> None:
        """Find NCCL transport errors and timeouts, map them to hosts and peers, and say node/path/fabric scope."""
        texts = {path.stem: _read_tail(path) for path in files}
        _print(fabric.fabric_observations(logs=texts, observed_at=utcnow()), as_json=as_json)

    @group.command("pair")
    def pair(
        server: str = typer.Option(..., "--server", help="node that runs the ib_write_bw server"),
        client: str = typer.Option(..., "--client", help="node that connects to it"),
        expected_gbps: float = typer.Option(
            ..., "--expected-gbps", help="recorded baseline for this path, Gb/s"
        ),
        baseline_source: str = typer.Option(
            "operator", "--baseline-source", help="where the baseline came from"
        ),
        hca: str | None = typer.Option(None, "--hca", help="HCA to test, e.g. mlx5_2"),
        cap: float = typer.Option(60.0, "--cap", help="time cap in seconds (at most 300)"),
        allow: bool = typer.Option(
            False, "--allow", help="required: this runs a bandwidth test on real nodes"
        ),
    ) -> None:
        """Opt-in: ib_write_bw between two nodes through the configured runner, against a baseline."""
        settings = load_settings()
        try:
            runner = node_probe.runner_for(settings=settings)
            server_run, client_run = node_probe.run_pair_bandwidth(
                runner=runner,
                server=server,
                client=client,
                allow=allow,
                time_cap_seconds=cap,
                hca=hca,
                duration_seconds=max(1, int(cap) - 20) if cap > 25 else 5,
            )
        except node_probe.ProbeNotAllowed as refused:
            raise _fail(str(refused), code=EXIT_REFUSED) from None
        except ValueError as error:
            raise _fail(str(error), code=EXIT_BAD_INPUT) from None
        observed = node_probe.parse_ib_write_bw(client_run.stdout)
        baseline = node_probe.Baseline(
            probe="ib_write_bw", expected=expected_gbps, unit="Gb/s", source=baseline_source
        )
        observation = node_probe.probe_observation(
            probe="ib_write_bw",
            nodes=[server, client],
            baseline=baseline,
            observed=observed,
            result=client_run,
            time_cap_seconds=cap,
            observed_at=utcnow(),
        )
        typer.echo(observation.text)
        if observed is None:
            detail = (client_run.stderr or server_run.stderr).strip()[:300]
            raise _fail(f"no bandwidth measured: {detail}", code=EXIT_PROBE_FAILED)

    @group.command("links")
    def links(
        node: str = typer.Option(..., "--node", help="node whose HCA ports to read with ibstat"),
        expected_gbps: float | None = typer.Option(None, "--expected-gbps", help="expected port rate, Gb/s"),
        cap: float = typer.Option(30.0, "--cap", help="time cap in seconds (at most 300)"),
        allow: bool = typer.Option(False, "--allow", help="required: this runs ibstat on the node"),
    ) -> None:
        """Opt-in: `ibstat` on one node through the configured runner; name ports down or below rate."""
        settings = load_settings()
        try:
            runner = node_probe.runner_for(settings=settings)
            result = node_probe.run_on_node(
                runner=runner, node=node, command=["ibstat"], allow=allow, time_cap_seconds=cap
            )
        except node_probe.ProbeNotAllowed as refused:
            raise _fail(str(refused), code=EXIT_REFUSED) from None
        except ValueError as error:
            raise _fail(str(error), code=EXIT_BAD_INPUT) from None
        if not result.ok:
            raise _fail(f"`{result.shown}` failed: {result.stderr.strip()[:300]}", code=EXIT_PROBE_FAILED)
        for item in node_probe.ib_link_observations(
            node=node,
            ports=node_probe.parse_ibstat(result.stdout),
            expected_rate_gbps=expected_gbps,
            observed_at=utcnow(),
        ):
            typer.echo(item.text)

    app.add_typer(group, name="fabric")
