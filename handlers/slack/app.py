"""Build the Bolt app from Settings and Services; no module-level app or client."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from slack_bolt import App, BoltContext
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)

from bot.config import Settings
from handlers.slack import findings as findings_post
from handlers.slack import once as interactions
from handlers.slack import router as commands
from handlers.slack.commands import compare as compare_slack
from handlers.slack.commands import incident as incident_subcommands
from handlers.slack.services import Services, WorkTracker

__all__ = ["BOT_SCOPES", "Services", "WorkTracker", "build_app", "make_web_client"]

# Exactly the bot token scopes the bot uses (the manifest prints these). Areas that call another
# Web API method add its scope here.
BOT_SCOPES: list[str] = [
    "commands",  # the /triage slash command
    "chat:write",  # root messages, thread replies, ephemeral replies, chat.update
    "chat:write.public",  # post in public channels without being invited first
    "users:read",  # users.info: names for handoffs
    "channels:read",  # conversations.info: channel names for records
    "files:write",  # files.uploadV2: charts and reports in the thread
]


def make_web_client(*, settings: Settings) -> WebClient:
    """The Web API client: token on the client (Bolt ignores App(token=) when given a client),
    `SLACK_API_URL` as base URL, and retries on 429 (Retry-After), 5xx and connection errors."""
    base_url = (
        settings.slack_api_url if settings.slack_api_url.endswith("/") else settings.slack_api_url + "/"
    )
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


def build_app(*, settings: Settings, services: Services, client: WebClient | None = None) -> App:
    """The Bolt app with `/triage` and every area's extra registrations attached."""
    signing_secret = settings.slack_signing_secret or ""
    app = App(
        client=client or make_web_client(settings=settings),
        signing_secret=signing_secret,
        request_verification_enabled=bool(signing_secret),
        # Acks run inline in the server thread; slow work goes to `lazy=` listeners on the executor.
        # With False, Bolt runs every ack on the same 5-thread executor as the lazy work and polls for
        # it every 10 ms: under a burst, acks queue behind snapshots (bench/bench_load.py: p99 955 ms
        # and 83 of 200 commands never acked, vs p99 ~100 ms and all acked with True).
        process_before_response=True,
        raise_error_for_unhandled_request=False,
    )
    services.metrics.watch_open_incidents(services.incidents.open_count_by_severity)

    @app.middleware
    def stamp_arrival(context: BoltContext, next: Callable[[], Any]) -> Any:
        context["received_at"] = time.monotonic()
        return next()

    for subcommand in compare_slack.subcommands():  # issue 3's compare (also on `job`) and issue 4's fabric
        services.subcommands.setdefault(subcommand.name, subcommand)
    interactions.register(app, services)  # a double-clicked button acts once
    for subcommand in incident_subcommands.default_subcommands():
        services.subcommands.setdefault(subcommand.name, subcommand)
    for register in services.extra_registrations:
        register(app, services)
    findings_post.register(app, services)
    commands.register(app, services)
    return app
