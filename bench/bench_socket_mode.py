"""Socket Mode figures: ack latency of `/triage` envelopes and how long a reconnect leaves the app deaf.

The app from the one builder, connected by `serve`'s own `connect_socket_mode` (Bolt's SocketModeHandler on
slack_sdk's built-in client) to the Socket Mode stand-in (tests/support/socket_mode.py) and the Web API
stand-in. Ack latency is measured where Slack measures it: from the envelope written to the socket to the
ack read back. Reconnect: from the stand-in's `disconnect` message / close frame / bare TCP FIN to the next
connection's hello, with the process CPU time spent meanwhile.
Run: PYTHONPATH=. python3 bench/bench_socket_mode.py [commands]
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bot.config import Settings
from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import BOT_TOKEN, SlackApiStandIn
from handlers.slack.app import build_slack_bot
from storage import db
from tests.support.slack import slash_fields
from tests.support.socket_mode import ACK_DEADLINE_SECONDS, SocketBotUnderTest, socket_serving


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _acks(running: SocketBotUnderTest, texts: list[str], *, burst: bool) -> list[float]:
    """Each envelope's ack latency: sent one at a time (each after the previous ack), or all at once."""
    latencies = []
    pending = []
    for number, text in enumerate(texts):
        envelope = running.socket.slash_command(slash_fields(text=text, trigger_id=f"bench.{number}.{time.time_ns()}"))
        if burst:
            pending.append(envelope)
        else:
            latencies.append(running.socket.wait_for_ack(envelope, timeout=60).latency)
    latencies += [running.socket.wait_for_ack(envelope, timeout=60).latency for envelope in pending]
    running.services.work.wait_idle(timeout=300)
    return latencies


def _report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    print(
        f"{name:<42} n={len(ordered):<4} p50={statistics.median(ordered) * 1000:7.1f} ms  "
        f"p95={p95 * 1000:7.1f} ms  max={ordered[-1] * 1000:7.1f} ms  "
        f"late (> {ACK_DEADLINE_SECONDS:.0f} s)={sum(value > ACK_DEADLINE_SECONDS for value in ordered)}"
    )


def _reconnect(running: SocketBotUnderTest, *, how: str) -> None:
    sock = running.socket
    count = len(sock.connections)
    started, cpu = time.monotonic(), _cpu()
    if how == "disconnect (refresh_requested)":
        sock.refresh(reason="refresh_requested")
    else:
        sock.drop(abrupt=how == "TCP FIN, no close frame")
    connected = sock.wait_for_connections(count + 1, timeout=120)
    took = time.monotonic() - started
    print(
        f"reconnect after {how:<30} {'in' if connected else 'NOT within'} {took:5.1f} s, "
        f"process CPU meanwhile {_cpu() - cpu:5.1f} s"
    )


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    with tempfile.TemporaryDirectory() as tmp, SlackApiStandIn() as slack:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        db.upgrade(url=url)
        settings = Settings(
            SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_API_URL=slack.base_url, DATABASE_URL=url, TRIAGE_SCHEDULER_ENABLED=False
        )
        bot = build_slack_bot(settings=settings, diagnoser=minimal_diagnoser)
        with socket_serving(bot, slack=slack) as running:
            _acks(running, ["help"] * 10, burst=False)  # warm up
            for burst in (False, True):
                how = "all at once" if burst else "one at a time"
                _report(f"ack: help, {how}", _acks(running, ["help"] * count, burst=burst))
                _report(f"ack: frobnicate (refused), {how}", _acks(running, ["frobnicate"] * count, burst=burst))
                started = time.perf_counter()
                jobs = [f"job bench/{how.replace(' ', '-')}-{n}" for n in range(count)]
                _report(f"ack: job <new id>, {how}", _acks(running, jobs, burst=burst))
                print(f"  {count} incidents opened, snapshotted and posted in {time.perf_counter() - started:.1f} s")
            for how in ("disconnect (refresh_requested)", "close frame (1001)", "TCP FIN, no close frame"):
                _reconnect(running, how=how)
            _report("ack after the reconnects: help", _acks(running, ["help"] * 10, burst=False))
            print(f"protocol errors: {running.socket.protocol_errors or 'none'}")


if __name__ == "__main__":
    main()
