"""The one app builder: `serve` (HTTP and Socket Mode), `demo` and every Slack test get the bot from here."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import sqlalchemy
from slack_bolt import App, BoltContext, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)

from bot.clusters.registry import Clusters
from bot.config import Settings
from bot.core import build_core
from bot.diagnosis.reach import ReachabilityCache
from bot.evidence import findings
from bot.evidence.report import Diagnoser
from bot.schedule.tasks import ensure_daily_prune
from handlers.ops import server
from handlers.ops.metrics import BotMetrics
from handlers.ops.server import WSGIApp
from handlers.slack import actions, alert_intake, commands, once, router
from handlers.slack.alert_intake import AlertRuntime
from handlers.slack.manifest import BOT_SCOPES  # noqa: F401 (the scopes this app uses live with the manifest)
from handlers.slack.notifier import SlackNotifier
from handlers.slack.services import Services
from storage import db

log = logging.getLogger(__name__)


@dataclasses.dataclass(kw_only=True)
class SlackBot:
    """The Bolt app and the services its listeners share."""

    app: App
    services: Services
    alerts: AlertRuntime | None = None  # POST /alerts/alertmanager, when TRIAGE_ALERTS_TOKEN is set

    @property
    def client(self) -> WebClient:
        """The Web API client (token, base URL and retries on it)."""
        return self.app.client

    def close(self) -> None:
        """Stop the alert worker and the scheduler if they run, and release the database."""
        if self.alerts is not None:
            self.alerts.close()
        self.services.core.close()


def make_web_client(*, settings: Settings) -> WebClient:
    """The Web API client: token on the client (Bolt ignores App(token=) when given a client),
    `SLACK_API_URL` as base URL, and retries on 429 (Retry-After), 5xx and connection errors."""
    base_url = settings.slack_api_url if settings.slack_api_url.endswith("/") else settings.slack_api_url + "/"
    return WebClient(
        token=settings.slack_bot_token,
        base_url=base_url,
        timeout=10,
        retry_handlers=[
            RateLimitErrorRetryHandler(max_retry_count=2),  # waits for Retry-After
            ServerErrorRetryHandler(max_retry_count=2),  # 500/503: Slack blinked; retry before giving up
            ConnectionErrorRetryHandler(max_retry_count=1),  # not on read timeouts: a post may have landed
        ],
    )


def build_slack_bot(
    *,
    settings: Settings,
    diagnoser: Diagnoser | None,
    diagnoser_label: str = "",
    clock: Callable[[], datetime] = findings.utcnow,
    engine: sqlalchemy.Engine | None = None,
    metrics: BotMetrics | None = None,
    clusters: Clusters | None = None,
) -> SlackBot:
    """Services over the settings' database, the `/triage` router with every subcommand, every button and
    modal, the double-click guard. The scheduler is built, not started: `serve` starts it. `clusters` is the
    registry the diagnoser uses (so both share its snapshot slots); built from the settings when not given."""
    metrics = metrics or BotMetrics()
    clusters = clusters or Clusters.from_settings(settings)
    client = make_web_client(settings=settings)
    core = build_core(
        settings=settings,
        engine=engine or db.make_engine(url=settings.database_url),
        diagnoser=None if diagnoser is None else metrics.observing(diagnoser, cluster_of=clusters.name_for),
        notifier=SlackNotifier(client=client),
        clock=clock,
        on_task_run=metrics.count_task,
        clusters=clusters,
    )
    reachability = ReachabilityCache(clusters=clusters, settings=settings)
    services = Services(
        core=core, subcommands=commands.registry(), metrics=metrics, diagnoser_label=diagnoser_label,
        reachability=reachability,
    )
    alerts = alert_intake.build(services=services, client=client)  # None unless TRIAGE_ALERTS_TOKEN is set
    ensure_daily_prune(store=core.tasks, now=clock())  # housekeeping of the exactly-once table
    signing_secret = settings.slack_signing_secret or ""
    app = App(
        client=client,
        signing_secret=signing_secret,
        request_verification_enabled=bool(signing_secret),
        # Acks run inline in the server thread; slow work goes to `lazy=` listeners on the executor.
        # With False, Bolt runs every ack on the same 5-thread executor as the lazy work and polls for
        # it every 10 ms: under a burst, acks queue behind snapshots (bench/bench_load.py: p99 955 ms
        # and 83 of 200 commands never acked, vs p99 ~100 ms and all acked with True).
        process_before_response=True,
        raise_error_for_unhandled_request=False,
        # Room for every cluster's snapshots and their queue, plus the rest: a slow cluster fills its own
        # slots (bot/clusters/gate.py), never the threads other clusters' commands run on.
        listener_executor=ThreadPoolExecutor(max_workers=listener_workers(clusters), thread_name_prefix="triage-work"),
    )
    metrics.watch_open_incidents(core.incidents.open_count_by_severity)
    metrics.watch_clusters(
        gates=lambda: [(name, clusters.gate(name).running, clusters.gate(name).waiting, clusters.gate(name).refused)
                       for name in clusters.names],
        reachable=lambda: [(item.name, item.reachable) for item in reachability.last()],
    )

    @app.error
    def refuse_malformed(error: Exception) -> BoltResponse:
        """A signed payload Bolt or a listener cannot read (a missing field, a wrong type) is refused with
        400 and a one-line log, never a 500 with a traceback."""
        log.warning("refused a signed Slack payload that could not be handled: %s: %s",
                    type(error).__name__, str(error)[:200])
        return BoltResponse(status=400, body=server.MALFORMED.decode(), headers={"content-type": "application/json"})

    @app.middleware
    def stamp_arrival(context: BoltContext, next: Callable[[], Any]) -> Any:
        context["received_at"] = time.monotonic()
        return next()

    once.register(app, services)  # a double-clicked button acts once
    actions.register(app, services)
    router.register(app, services)
    return SlackBot(app=app, services=services, alerts=alerts)


LISTENER_BASE_WORKERS = 8
LISTENER_MAX_WORKERS = 256


def listener_workers(clusters: Clusters) -> int:
    """Threads for slow work after the ack: each cluster's running and queued snapshots, plus the base."""
    held = sum(2 * spec.max_snapshots for spec in clusters.specs)
    return min(LISTENER_MAX_WORKERS, LISTENER_BASE_WORKERS + held)


def http_app(bot: SlackBot) -> WSGIApp:
    """The bot behind the one HTTP surface: `/slack/events`, `/alerts/alertmanager`, `/healthz`, `/readyz`,
    `/metrics`."""
    from slack_bolt.adapter.wsgi import SlackRequestHandler

    core = bot.services.core

    def database() -> None:
        db.ping(engine=core.engine)

    def slack() -> None:
        try:
            bot.client.auth_test()
        except SlackApiError as error:
            raise RuntimeError(f"auth.test: {error.response.get('error')}") from None

    def scheduler() -> None:
        if core.settings.scheduler_enabled and not core.scheduler.running:
            raise RuntimeError("scheduler is not running")

    def clusters() -> dict[str, str]:
        cache = bot.services.reachability
        statuses = cache.statuses() if cache is not None else []
        return {item.name: "ok" if item.reachable else item.detail for item in statuses}

    readiness = server.Readiness(
        checks={"database": database, "slack": slack, "scheduler": scheduler}, cached=frozenset({"slack"}),
        details={"clusters": clusters},
    )
    # Only a bot that verifies signatures takes Slack's requests over HTTP; without a signing secret
    # (Socket Mode) the request URL accepts nothing, so no unsigned request can act as a user.
    events = SlackRequestHandler(bot.app) if core.settings.slack_signing_secret else None
    alerts = bot.alerts
    return server.make_wsgi_app(
        events=events, readiness=readiness, registry=bot.services.metrics.registry,
        alerts=alerts.wsgi if alerts is not None else None, details=alerts.status if alerts is not None else None,
        events_max_bytes=core.settings.http_max_body_bytes,
    )
