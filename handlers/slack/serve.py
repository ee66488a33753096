"""`triage-bot serve`: the bot from the one builder, over HTTP or Socket Mode, with health, readiness and
metrics on one port, and a graceful drain on SIGTERM."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated

import typer

from handlers.slack.app import SlackBot


def register(app: typer.Typer) -> None:
    """Attach `serve`."""

    @app.command("serve")
    def serve(
        port: Annotated[int | None, typer.Option("--port", help="HTTP port (default PORT or 3000).")] = None,
        host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "0.0.0.0",
        migrate: Annotated[bool, typer.Option(help="Run database migrations first.")] = True,
    ) -> None:
        """Run the Slack bot (HTTP, or Socket Mode with SLACK_APP_TOKEN)."""
        run(port=port, host=host, migrate=migrate)


def run(*, port: int | None, host: str, migrate: bool) -> None:
    """Build the bot, serve until SIGTERM/SIGINT, drain, exit 0."""
    from slack_bolt.error import BoltError

    from bot.clusters.registry import Clusters
    from bot.clusters.spec import ClusterConfigError
    from bot.config import load_settings
    from bot.diagnosis.service import diagnose
    from handlers.ops import logs, shutdown
    from handlers.ops import server as http_server
    from handlers.slack.app import build_slack_bot, http_app
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
    try:
        clusters = Clusters.from_settings(settings)  # one registry: its snapshot slots are the process's
    except ClusterConfigError as error:
        typer.echo(f"The cluster configuration cannot be used: {error}. `triage-bot clusters` checks it.", err=True)
        raise typer.Exit(code=2) from None
    if migrate:
        db.upgrade(url=settings.database_url)
    try:
        bot = build_slack_bot(settings=settings, diagnoser=diagnose, clusters=clusters)
    except BoltError as error:
        typer.echo(f"Slack refused the bot token ({error}). Check SLACK_BOT_TOKEN and SLACK_API_URL.", err=True)
        raise typer.Exit(code=2) from None
    except ValueError as error:  # the alert intake's token or routing rules (bot.alerts.routing.RulesError)
        typer.echo(f"Alert intake: {error}", err=True)
        raise typer.Exit(code=2) from None
    core = bot.services.core
    interrupted = core.incidents.recover_interrupted_snapshots(
        instance_id=settings.instance_id,
        stale_after=timedelta(seconds=2 * settings.bounds.deadline_seconds + 60),
    )
    if interrupted:
        typer.echo(f"Marked interrupted snapshots on {', '.join(interrupted)}", err=True)
    if settings.scheduler_enabled:
        core.scheduler.start()
    bind_port = port if port is not None else settings.port
    server = http_server.create_server(
        wsgi_app=http_app(bot), host=host, port=bind_port, limits=http_server.ServerLimits.from_settings(settings)
    )
    stop = shutdown.stop_event_on_signals()
    serving = threading.Thread(target=server.run, name="triage-bot-http", daemon=True)
    serving.start()

    def close_http() -> None:
        server.trigger.pull_trigger(server.close)
        serving.join(timeout=5)

    if socket_mode:
        close_socket = connect_socket_mode(bot=bot, app_token=settings.slack_app_token or "")
        typer.echo(f"Socket Mode; health and metrics on http://{host}:{server.effective_port}")

        def close_all() -> None:
            close_socket()
            close_http()

        _wait_then_drain(bot=bot, stop=stop, stop_accepting=close_all)
        return
    typer.echo(f"HTTP mode: Slack request URL path {http_server.EVENTS_PATH} on http://{host}:{server.effective_port}")
    _wait_then_drain(bot=bot, stop=stop, stop_accepting=close_http)


def connect_socket_mode(*, bot: SlackBot, app_token: str) -> Callable[[], None]:
    """Connect the same app out to Slack over Socket Mode; returns how to close it."""
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from slack_sdk.errors import SlackApiError

    # A 2 s ping notices a connection that died without a close frame within seconds; at the default 10 s the
    # built-in client stayed deaf for about 50 s (bench/bench_socket_mode.py).
    handler = SocketModeHandler(bot.app, app_token, ping_interval=2)
    try:
        handler.connect()
    except SlackApiError as error:
        typer.echo(
            f"Slack refused SLACK_APP_TOKEN for Socket Mode ({error.response.get('error')}). Generate an "
            "app-level token with connections:write under Basic Information -> App-Level Tokens.",
            err=True,
        )
        raise typer.Exit(code=2) from None
    return handler.close


def _wait_then_drain(*, bot: SlackBot, stop: threading.Event, stop_accepting: Callable[[], None]) -> None:
    """Serve until SIGTERM/SIGINT, drain within the grace period, then exit 0 at once: a snapshot still
    running in a worker thread is already recorded as interrupted and must not hold the process."""
    import os
    import sys

    from handlers.ops import shutdown

    stop.wait()
    shutdown.drain(
        core=bot.services.core,
        work=bot.services.work,
        stop_accepting=stop_accepting,
        grace_seconds=bot.services.settings.shutdown_grace_seconds,
    )
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
