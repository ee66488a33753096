"""Terminal subcommands for the incident lifecycle: demo, serve, manifest, db upgrade, version."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from collections.abc import Callable

    from bot.evidence.report import Diagnoser
    from handlers.slack.services import Services

DEFAULT_DEMO_DIR = Path("triage-demo")


def register(app: typer.Typer) -> None:
    """Attach this area's subcommands."""

    @app.command("version")
    def version() -> None:
        """Print the installed version."""
        from importlib.metadata import version as installed_version

        typer.echo(installed_version("triage-bot"))

    @app.command("demo")
    def demo(
        out: Annotated[
            Path, typer.Option("--out", help="Where to write the handoff and postmortem.")
        ] = DEFAULT_DEMO_DIR,
    ) -> None:
        """Play one incident locally; write its handoff and postmortem."""
        from rich.console import Console

        from handlers.slack import demo as demo_play

        logging.basicConfig(level=logging.WARNING)
        demo_play.play(out_dir=out, console=Console())

    @app.command("serve")
    def serve(
        port: Annotated[int | None, typer.Option("--port", help="HTTP port (default PORT or 3000).")] = None,
        host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "0.0.0.0",
        migrate: Annotated[bool, typer.Option(help="Run database migrations first.")] = True,
    ) -> None:
        """Run the Slack bot (HTTP, or Socket Mode with SLACK_APP_TOKEN)."""
        _serve(port=port, host=host, migrate=migrate)

    @app.command("manifest")
    def manifest(
        url: Annotated[
            str | None, typer.Option("--url", help="Public base URL of `serve` (HTTP mode).")
        ] = None,
        socket_mode: Annotated[bool, typer.Option("--socket-mode", help="Manifest for Socket Mode.")] = False,
    ) -> None:
        """Print the Slack app manifest (YAML) to create the app."""
        from handlers.slack.manifest import manifest_yaml

        typer.echo(manifest_yaml(base_url=url, socket_mode=socket_mode), nl=False)

    db_app = typer.Typer(help="Database schema (alembic migrations).", no_args_is_help=True)

    @db_app.command("upgrade")
    def upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
        """Migrate DATABASE_URL to the latest schema."""
        from bot.config import load_settings
        from storage import db

        settings = load_settings()
        db.upgrade(url=settings.database_url, revision=revision)
        typer.echo(f"database at {revision}: {_redacted(settings.database_url)}")

    app.add_typer(db_app, name="db", help="Database schema migrations (db upgrade).")


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _production_diagnoser() -> Diagnoser | None:
    """The cluster diagnoser from bot.diagnosis.service when that area is installed."""
    try:
        from bot.diagnosis import service as diagnose  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(diagnose, "diagnose", None)


def _serve(*, port: int | None, host: str, migrate: bool) -> None:
    from slack_bolt.error import BoltError
    from slack_sdk.errors import SlackApiError

    from bot.config import load_settings
    from bot.incidents.service import IncidentService
    from handlers.ops import logs, shutdown
    from handlers.ops import server as http_server
    from handlers.ops.metrics import BotMetrics
    from handlers.slack.app import build_app
    from handlers.slack.services import Services
    from storage import db

    logs.configure()  # JSON lines on stderr, for our loggers and every library's
    settings = load_settings()
    socket_mode = bool(settings.slack_app_token)
    if not settings.slack_bot_token or not (socket_mode or settings.slack_signing_secret):
        typer.echo(
            "Set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (HTTP mode), or SLACK_BOT_TOKEN and SLACK_APP_TOKEN "
            "(Socket Mode). `triage-bot manifest` prints the Slack app to create; the README walks through it.",
            err=True,
        )
        raise typer.Exit(code=2)
    if migrate:
        db.upgrade(url=settings.database_url)
    metrics = BotMetrics()
    diagnoser = _production_diagnoser()
    if diagnoser is not None:
        diagnoser = metrics.observing(diagnoser)  # snapshot duration and collector outcomes on /metrics
    services = Services(
        metrics=metrics,
        settings=settings,
        incidents=IncidentService(
            engine=db.make_engine(url=settings.database_url),
            diagnoser=diagnoser,
            admin_user_ids=settings.admin_user_ids,
        ),
        diagnoser=diagnoser,
    )
    interrupted = services.incidents.recover_interrupted_snapshots(
        instance_id=settings.instance_id,
        stale_after=timedelta(seconds=2 * settings.bounds.deadline_seconds + 60),
    )
    if interrupted:
        typer.echo(f"Marked interrupted snapshots on {', '.join(interrupted)}", err=True)
    from handlers.slack import actions as records_slack

    records_slack.install(services)  # changes, handoff/postmortem, durable scheduled jobs (starts the scheduler)
    try:
        app = build_app(settings=settings, services=services)
    except BoltError as error:
        typer.echo(
            f"Slack refused the bot token ({error}). Check SLACK_BOT_TOKEN and SLACK_API_URL.", err=True
        )
        raise typer.Exit(code=2) from None
    wsgi = http_server.make_wsgi_app(app=app, services=services)
    bind_port = port if port is not None else settings.port
    server = http_server.create_server(wsgi_app=wsgi, host=host, port=bind_port)
    stop = shutdown.stop_event_on_signals()
    serving = threading.Thread(target=server.run, name="triage-bot-http", daemon=True)
    serving.start()

    def close_http() -> None:
        server.trigger.pull_trigger(server.close)
        serving.join(timeout=5)

    if socket_mode:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        typer.echo(f"Socket Mode; health and metrics on http://{host}:{server.effective_port}")
        handler = SocketModeHandler(app, settings.slack_app_token)
        try:
            handler.connect()
        except SlackApiError as error:
            typer.echo(
                f"Slack refused SLACK_APP_TOKEN for Socket Mode ({error.response.get('error')}). Generate an "
                "app-level token with connections:write under Basic Information -> App-Level Tokens.",
                err=True,
            )
            raise typer.Exit(code=2) from None

        def close_all() -> None:
            handler.close()
            close_http()

        _wait_then_drain(services=services, stop=stop, stop_accepting=close_all)
        return
    typer.echo(
        f"HTTP mode: Slack request URL path {http_server.EVENTS_PATH} on http://{host}:{server.effective_port}"
    )
    _wait_then_drain(services=services, stop=stop, stop_accepting=close_http)


def _wait_then_drain(*, services: Services, stop: threading.Event, stop_accepting: Callable[[], None]) -> None:
    """Serve until SIGTERM/SIGINT, drain within the grace period, then exit 0 at once: a snapshot still
    running in a worker thread is already recorded as interrupted and must not hold the process."""
    import os
    import sys

    from handlers.ops import shutdown

    stop.wait()
    shutdown.drain(
        services=services, stop_accepting=stop_accepting, grace_seconds=services.settings.shutdown_grace_seconds
    )
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
