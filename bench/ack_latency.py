"""Ack latency of `/triage` over real HTTP: signed requests to the real server, Slack stand-in behind it.

Prints p50/p95/max of the HTTP round trip (request sent -> ack received) and the ratio to Slack's
3-second budget, for cheap subcommands and for `job` (whose snapshot runs after the ack).
Run: PYTHONPATH=. python3 bench/ack_latency.py [requests]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import requests

from bot.config import Settings
from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import BOT_TOKEN, SlackApiStandIn
from bot.lab.slack_events import signature_headers
from handlers.ops import server as http_server
from handlers.slack.app import build_slack_bot, http_app
from handlers.slack.services import Services
from storage import db

SECRET = "bench-secret"
SLACK_BUDGET_S = 3.0


def _body(*, text: str, number: int) -> str:
    return urllib.parse.urlencode(
        {
            "team_id": "T0B",
            "channel_id": f"C{number % 7}",
            "user_id": "U0BENCH",
            "command": "/triage",
            "text": text,
            "trigger_id": f"bench.{number}.{time.time_ns()}",
            "response_url": "https://hooks.invalid/x",
        }
    )


def _measure(*, session: requests.Session, url: str, texts: list[str], services: Services) -> list[float]:
    samples = []
    for number, text in enumerate(texts):
        body = _body(text=text, number=number)
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            **signature_headers(body=body, secret=SECRET),
        }
        started = time.perf_counter()
        response = session.post(f"{url}/slack/events", data=body.encode(), headers=headers, timeout=10)
        samples.append(time.perf_counter() - started)
        response.raise_for_status()
    services.work.wait_idle(timeout=120)
    return samples


def _report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    print(
        f"{name:<28} n={len(ordered):<5} p50={p50 * 1000:7.1f} ms  p95={p95 * 1000:7.1f} ms  "
        f"max={ordered[-1] * 1000:7.1f} ms  max/3s budget={ordered[-1] / SLACK_BUDGET_S:.3f}"
    )


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp, SlackApiStandIn() as slack:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        db.upgrade(url=url)
        settings = Settings(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=slack.base_url,
            DATABASE_URL=url,
            TRIAGE_SCHEDULER_ENABLED=False,
        )
        bot = build_slack_bot(settings=settings, diagnoser=minimal_diagnoser)
        services = bot.services
        running = http_server.start_in_thread(wsgi_app=http_app(bot))
        try:
            with requests.Session() as session:
                _measure(session=session, url=running.url, texts=["help"] * 10, services=services)  # warm up
                _report(
                    "ack: /triage help",
                    _measure(session=session, url=running.url, texts=["help"] * count, services=services),
                )
                _report(
                    "ack: /triage frobnicate",
                    _measure(
                        session=session, url=running.url, texts=["frobnicate"] * count, services=services
                    ),
                )
                jobs = [f"job bench/job-{n}" for n in range(count)]
                started = time.perf_counter()
                _report(
                    "ack: /triage job <new id>",
                    _measure(session=session, url=running.url, texts=jobs, services=services),
                )
                total = time.perf_counter() - started
                print(
                    f"{count} incidents opened, snapshotted and posted in {total:.1f} s "
                    f"({count / total:.1f} incidents/s); Slack calls recorded: {len(slack.calls)}"
                )
        finally:
            running.stop()
            bot.close()


if __name__ == "__main__":
    main()
