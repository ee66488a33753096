"""`triage-bot lab`: simulated clusters (a busy cluster, one failing workload) served on loopback."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Annotated

import typer

EXIT_BAD_INPUT = 2


def register(app: typer.Typer) -> None:
    """Attach the `lab` group."""
    lab = typer.Typer(help="Simulated clusters for the demo, practice and tests.", no_args_is_help=True)

    @lab.command("list")
    def lab_list() -> None:
        """Name the lab scenarios and what each simulates."""
        from bot.lab import node_scenarios, scenarios

        for name, factory in {**scenarios.SCENARIOS, **node_scenarios.NODE_SCENARIOS}.items():
            typer.echo(f"{name:22} {' '.join((factory.__doc__ or '').split())}")

    @lab.command("serve")
    def lab_serve(
        scenario: Annotated[str, typer.Argument(help="a name from `lab list`")],
        kubeconfig_out: Annotated[Path | None, typer.Option(help="where to write the kubeconfig")] = None,
        seconds: Annotated[float | None, typer.Option(help="stop after this long (default: Ctrl-C)")] = None,
    ) -> None:
        """Serve a simulated cluster on loopback and print a kubeconfig for it."""
        from bot.lab import kube_api, scenarios

        try:
            built = scenarios.build(scenario)
        except scenarios.UnknownScenario as exc:
            raise _fail(str(exc.args[0]), code=EXIT_BAD_INPUT) from None
        server = kube_api.KubeApiServer(state=built.state).start()
        path = kubeconfig_out or Path(tempfile.mkdtemp(prefix="triage-lab-")) / "kubeconfig"
        server.write_kubeconfig(path=path)
        typer.echo(f"kubeconfig: {path}")
        typer.echo(f"server: {server.url}")
        typer.echo(f"scenario: {built.name} — {built.description}")
        if built.target.startswith("node:"):
            typer.echo(f"try: triage-bot triage node {built.target} --kubeconfig {path}")
        else:
            typer.echo(f"try: triage-bot triage job {built.target} --kubeconfig {path} --compare {built.healthy_target}")
        typer.echo(f"     kubectl --kubeconfig {path} get pods -A -o wide")
        typer.echo(server.kubeconfig_text(), nl=True)
        stop = threading.Event()
        try:
            stop.wait(timeout=seconds)
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()

    app.add_typer(lab, name="lab")


def _fail(message: str, *, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=code)
