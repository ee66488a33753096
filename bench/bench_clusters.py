"""Two clusters, one slow: how long a snapshot on the fast one takes alone, and while the slow one is flooded.

The real bot (the one app builder, waitress on loopback, the Slack stand-in, SQLite) serves two lab API servers
as named clusters `fast` and `slow`. Every request to `slow` is delayed; `/triage snapshot` on the slow
incident is sent many times at once, then `/triage snapshot` on the fast incident is timed from the signed
POST until its findings are posted in the thread. Printed: the fast snapshot's median/max alone and while the
slow cluster is flooded, with the per-cluster slots (this design), and with one shared pool of 5 workers and
no per-cluster limit (Bolt's default, what the bot had before clusters had names).

    PYTHONPATH=$PWD python3 bench/bench_clusters.py [--slow-latency 1.5] [--flood 12] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import Settings  # after the path fix, for direct runs
from bot.diagnosis.service import diagnose
from bot.lab import scenarios, slack_events
from bot.lab.kube_api import KubeApiServer
from bot.lab.slack_api import BOT_TOKEN, SlackApiStandIn
from handlers.ops import server as http_server
from handlers.slack import app as slack_app
from storage import db

SECRET = "bench-signing-secret-0123456789"
FAST_CHANNEL, SLOW_CHANNEL = "C0FAST", "C0SLOW"


def _body(text: str, channel: str, serial: int) -> str:
    return urllib.parse.urlencode({
        "team_id": "T0LAB", "channel_id": channel, "user_id": "U0BENCH", "command": "/triage", "text": text,
        "response_url": "http://127.0.0.1:9/unused", "trigger_id": f"bench.{serial}.{time.time_ns()}",
    })


class Bench:
    """One bot serving the two lab clusters."""

    def __init__(self, *, folder: Path, slack: SlackApiStandIn, servers: dict[str, KubeApiServer],
                 shared_pool: bool) -> None:
        entries = []
        for name, server in servers.items():
            path = server.write_kubeconfig(path=folder / f"kubeconfig-{name}", context=name)
            entries.append({"name": name, "kubernetes": {"kubeconfig": str(path)},
                            "max_snapshots": 64 if shared_pool else 4,
                            "bounds": {"deadline_seconds": 12, "call_timeout_seconds": 6}})
        database_url = f"sqlite:///{folder / ('shared.db' if shared_pool else 'slots.db')}"
        db.upgrade(url=database_url)
        settings = Settings(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SECRET, SLACK_API_URL=slack.base_url,
                            DATABASE_URL=database_url, TRIAGE_SCHEDULER_ENABLED=False,
                            TRIAGE_CLUSTERS=json.dumps({"clusters": entries}))
        original = slack_app.listener_workers
        if shared_pool:  # before: Bolt's default pool of 5 threads shared by every command, no per-cluster limit
            slack_app.listener_workers = lambda clusters: 5
        try:
            self.bot = slack_app.build_slack_bot(settings=settings, diagnoser=diagnose)
        finally:
            slack_app.listener_workers = original
        self.slack = slack
        self.running = http_server.start_in_thread(wsgi_app=slack_app.http_app(self.bot))
        self.serial = 0

    def post(self, text: str, channel: str) -> None:
        self.serial += 1
        body = _body(text, channel, self.serial)
        headers = {"Content-Type": "application/x-www-form-urlencoded",
                   **slack_events.signature_headers(body=body, secret=SECRET)}
        requests.post(f"{self.running.url}/slack/events", data=body.encode(), headers=headers, timeout=10)

    def thread_posts(self, channel: str) -> int:
        return sum(1 for call in self.slack.calls_to("chat.postMessage")
                   if call.params.get("channel") == channel and call.params.get("thread_ts"))

    def timed_snapshot(self, key: str, channel: str, *, limit: float = 120.0) -> float:
        """Seconds from the signed POST until the snapshot's findings are in the thread (2 thread posts)."""
        before = self.thread_posts(channel)
        started = time.monotonic()
        self.post(f"snapshot {key}", channel)
        if not self.slack.wait_for(lambda _calls: self.thread_posts(channel) >= before + 2, timeout=limit):
            raise RuntimeError(f"no findings for {key} within {limit:g} s")
        return time.monotonic() - started

    def close(self) -> None:
        self.bot.services.work.wait_idle(timeout=120)
        self.running.stop()
        self.bot.close()


def _stats(values: list[float]) -> str:
    each = ", ".join(f"{value * 1000:.0f}" for value in values)
    return f"first {values[0] * 1000:6.0f} ms, median {statistics.median(values) * 1000:6.0f} ms, " \
           f"max {max(values) * 1000:6.0f} ms  (each: {each})"


@contextlib.contextmanager
def _labs() -> Iterator[dict[str, KubeApiServer]]:
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(KubeApiServer(state=scenarios.build(scenario).state))
               for name, scenario in (("fast", "oom"), ("slow", "nccl-ib"))}


def run(*, shared_pool: bool, latency: float, flood: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder, SlackApiStandIn() as slack, _labs() as servers:
        bench = Bench(folder=Path(folder), slack=slack, servers=servers, shared_pool=shared_pool)
        try:
            bench.post("job fast:ml/train-llm", FAST_CHANNEL)
            bench.post("job slow:ml/train-llm", SLOW_CHANNEL)
            if not bench.bot.services.work.wait_idle(timeout=60):
                raise RuntimeError("the incidents did not open")
            keys = {item.cluster: item.key for item in bench.bot.services.incidents.list_open()}
            alone = [bench.timed_snapshot(keys["fast"], FAST_CHANNEL) for _ in range(rounds)]
            servers["slow"].inject(path_pattern=r"^/api", latency_seconds=latency)
            flooders = [threading.Thread(target=bench.post, args=(f"snapshot {keys['slow']}", SLOW_CHANNEL))
                        for _ in range(flood)]
            for thread in flooders:
                thread.start()
            for thread in flooders:
                thread.join(10)
            time.sleep(0.5)  # the flood has reached the slow cluster before the fast one is timed
            gate = bench.bot.services.core.clusters.gate("slow")
            held = {"running": gate.running, "waiting": gate.waiting, "busy": gate.refused}
            flooded = [bench.timed_snapshot(keys["fast"], FAST_CHANNEL) for _ in range(rounds)]
            servers["slow"].clear_faults()
        finally:
            bench.close()
    return {"alone": alone, "flooded": flooded, "slow_gate": held}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow-latency", type=float, default=1.5, help="seconds added to every request to `slow`")
    parser.add_argument("--flood", type=int, default=12, help="snapshots sent to `slow` at once")
    parser.add_argument("--rounds", type=int, default=5, help="fast snapshots timed in each phase")
    args = parser.parse_args()
    print(f"two lab clusters; every request to `slow` delayed {args.slow_latency:g} s; {args.flood} snapshots "
          f"sent to `slow` at once; {args.rounds} snapshots of `fast` timed (POST -> findings posted)")
    for label, shared in (("per-cluster slots (4 each)", False), ("one shared pool of 5, no limit", True)):
        result = run(shared_pool=shared, latency=args.slow_latency, flood=args.flood, rounds=args.rounds)
        print(f"\n{label}:")
        print(f"  fast alone:                {_stats(result['alone'])}")
        print(f"  fast while slow is flooded: {_stats(result['flooded'])}")
        print(f"  slow cluster at that time: {result['slow_gate']}")
        ratio = max(result["flooded"]) / max(result["alone"])
        print(f"  worst flooded / worst alone: {ratio:.1f}x")


if __name__ == "__main__":
    main()
