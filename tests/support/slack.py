"""Signed Slack requests (HMAC v0 with timestamp) and fixtures that run the real bot over real HTTP."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bot.config import Settings
from bot.evidence.report import Diagnoser
from bot.lab import slack_events
from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import BOT_TOKEN, SlackApiStandIn
from handlers.ops import server as http_server
from handlers.slack.app import SlackBot, build_slack_bot, http_app
from handlers.slack.services import Services
from storage import db

SIGNING_SECRET = "lab-signing-secret-0123456789abcdef"


def sign(*, body: str, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    """The two headers Slack sends: `X-Slack-Request-Timestamp` and `X-Slack-Signature` (v0 HMAC-SHA256)."""
    return slack_events.signature_headers(body=body, secret=secret, timestamp=timestamp)


def slash_fields(
    *,
    text: str,
    user_id: str = "U0ALICE",
    channel_id: str = "C0INC",
    trigger_id: str | None = None,
    response_url: str = "http://127.0.0.1:9/response-unused",
) -> dict[str, str]:
    """A slash command's fields as Slack sends them: form-encoded over HTTP, a JSON object over Socket Mode."""
    return {
        "token": "deprecated-verification-token",
        "team_id": "T0LAB",
        "team_domain": "lab",
        "channel_id": channel_id,
        "channel_name": "incidents",
        "user_id": user_id,
        "user_name": user_id.lower(),
        "command": "/triage",
        "text": text,
        "api_app_id": "A0TRIAGE",
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id or f"{time.time_ns()}.lab.{hashlib.sha1(text.encode()).hexdigest()[:8]}",
    }


def slash_body(**fields: Any) -> str:
    """A form-encoded slash command body like Slack's (arguments as for `slash_fields`)."""
    return urllib.parse.urlencode(slash_fields(**fields))


@dataclasses.dataclass(kw_only=True)
class BotUnderTest:
    """The real server on 127.0.0.1:<port>, its stand-in Slack, and the services behind it."""

    server: http_server.RunningServer
    slack: SlackApiStandIn
    services: Services
    bot: SlackBot

    def post(
        self, body: str, *, headers: dict[str, str] | None = None, signed: bool = True
    ) -> requests.Response:
        """POST a body to /slack/events, signed unless told otherwise."""
        all_headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            **(sign(body=body) if signed else {}),
        }
        all_headers.update(headers or {})
        return requests.post(
            f"{self.server.url}/slack/events", data=body.encode(), headers=all_headers, timeout=10
        )

    def command(self, text: str, **kwargs: Any) -> requests.Response:
        """Send `/triage <text>` and wait until the work it started is done."""
        kwargs.setdefault("response_url", self.slack.response_url())
        response = self.post(slash_body(text=text, **kwargs))
        assert self.services.work.wait_idle(timeout=30), "lazy work did not finish"
        return response


def lab_settings(*, database_url: str, slack: SlackApiStandIn, **overrides: Any) -> Settings:
    """Settings pointing at the stand-in and a migrated database; the scheduler off (tests run due tasks)."""
    settings = Settings(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        DATABASE_URL=database_url,
        TRIAGE_SCHEDULER_ENABLED=False,
    )
    db.upgrade(url=database_url)
    return settings.model_copy(update=overrides) if overrides else settings


def make_bot(
    *,
    database_url: str,
    slack: SlackApiStandIn,
    diagnoser: Diagnoser | None,
    settings: Settings | None = None,
    **builder: Any,
) -> SlackBot:
    """The production bot from the one builder, against the stand-in and a fresh database."""
    return build_slack_bot(
        settings=settings or lab_settings(database_url=database_url, slack=slack),
        diagnoser=diagnoser,
        diagnoser_label="minimal demo cluster",
        **builder,
    )


@contextlib.contextmanager
def serving(bot: SlackBot, *, slack: SlackApiStandIn) -> Iterator[BotUnderTest]:
    """The bot behind the real waitress server on 127.0.0.1, stopped (and its work drained) afterwards."""
    running = http_server.start_in_thread(wsgi_app=http_app(bot))
    slack.clear()
    try:
        yield BotUnderTest(server=running, slack=slack, services=bot.services, bot=bot)
    finally:
        bot.services.work.wait_idle(timeout=30)
        running.stop()
        bot.close()


@pytest.fixture
def slack_stand_in() -> Iterator[SlackApiStandIn]:
    """The Slack Web API stand-in on an ephemeral loopback port."""
    with SlackApiStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def bot_database_url(tmp_path: Path) -> str:
    """A fresh SQLite file per test."""
    return f"sqlite:///{tmp_path / 'triage.db'}"


@pytest.fixture
def bot(slack_stand_in: SlackApiStandIn, bot_database_url: str) -> Iterator[BotUnderTest]:
    """The real Bolt app (from the one builder) behind the real waitress server, talking to the stand-in."""
    built = make_bot(database_url=bot_database_url, slack=slack_stand_in, diagnoser=minimal_diagnoser)
    with serving(built, slack=slack_stand_in) as running:
        yield running
