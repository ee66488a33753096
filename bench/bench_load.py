"""Load benchmark: N concurrent signed `/triage` commands against the real server on loopback.

Prints ack latency (p50/p95/p99/max), commands completed, incidents created, messages posted and
errors, and checks the promises: every ack under Slack's 3 s, p99 under 100 ms, no command lost
or duplicated. Everything is bounded: a fixed number of requests, per-request timeouts and one
overall deadline, so the benchmark always stops by itself.

    PYTHONPATH=$PWD python3 bench/bench_load.py [--commands 200] [--concurrency 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.lab.slack_events import signature_headers  # after the path fix, for direct runs

SIGNING_SECRET = "bench-signing-secret-0123456789"
TEAM_ID = "T0LAB"
ACK_LIMIT_S = 3.0
ROOT_TEXT = re.compile(r"INC-\d+(?= )")
P99_TARGET_S = 0.100


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlannedCommand:
    """One `/triage` invocation the benchmark will send, and what it should lead to."""

    index: int
    text: str
    channel_id: str
    user_id: str
    trigger_id: str
    retry_of: int | None = None  # a Slack retry (same trigger_id, X-Slack-Retry-Num: 1)

    @property
    def subcommand(self) -> str:
        """First word of the text."""
        return self.text.split(" ", 1)[0]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sent:
    """What happened to one request on the wire."""

    command: PlannedCommand
    status: int
    ack_seconds: float
    error: str = ""


def plan_commands(
    *, total: int, distinct_targets: int, retry_share: float, seed: int
) -> list[PlannedCommand]:
    """A reproducible mix: mostly `job` (some for the same workload), plus status, note, list, help,
    malformed ids, and Slack retries of earlier commands."""
    rng = random.Random(seed)
    plan: list[PlannedCommand] = []
    for index in range(total):
        target = rng.randrange(distinct_targets)
        channel = f"C{target:07d}"
        user = f"U{rng.randrange(50):07d}"
        roll = rng.random()
        if plan and roll < retry_share:
            original = rng.choice([item for item in plan if item.retry_of is None])
            plan.append(dataclasses.replace(original, index=index, retry_of=original.index))
            continue
        if roll < 0.55:
            text = f"job bench/train-{target}"
        elif roll < 0.65:
            text = f"note saw NCCL timeouts on rank {rng.randrange(64)}"
        elif roll < 0.72:
            text = "status identified"
        elif roll < 0.80:
            text = "list"
        elif roll < 0.86:
            text = "help"
        elif roll < 0.93:
            text = rng.choice(
                ["job ../../etc/passwd", "job ml/train;rm -rf /", "job ｍｌ/train", "frobnicate"]
            )
        else:
            text = f"job {80000 + target}"
        plan.append(
            PlannedCommand(
                index=index, text=text, channel_id=channel, user_id=user, trigger_id=f"trig.{index}.{seed}"
            )
        )
    return plan


def form_body(*, command: PlannedCommand) -> str:
    """The form-encoded body Slack sends for a slash command."""
    fields = {
        "token": "deprecated-verification-token",
        "team_id": TEAM_ID,
        "team_domain": "lab",
        "channel_id": command.channel_id,
        "channel_name": f"incident-{command.channel_id.lower()}",
        "user_id": command.user_id,
        "user_name": command.user_id.lower(),
        "command": "/triage",
        "text": command.text,
        "api_app_id": "A0TRIAGE",
        "is_enterprise_install": "false",
        "response_url": "https://hooks.slack.invalid/commands/T0LAB/1/bench",
        "trigger_id": command.trigger_id,
    }
    return urllib.parse.urlencode(fields)


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(share * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summarise_latency(sent: Sequence[Sent]) -> dict[str, float]:
    """p50/p95/p99/max/mean ack latency in milliseconds over answered requests."""
    answered = [item.ack_seconds for item in sent if item.status]
    if not answered:
        return {}
    return {
        "p50_ms": percentile(answered, 0.50) * 1000,
        "p95_ms": percentile(answered, 0.95) * 1000,
        "p99_ms": percentile(answered, 0.99) * 1000,
        "max_ms": max(answered) * 1000,
        "mean_ms": statistics.fmean(answered) * 1000,
    }


def describe_mix(plan: Sequence[PlannedCommand]) -> str:
    """`job=110 note=20 ... retries=10` for the printout."""
    counts = Counter(item.subcommand for item in plan if item.retry_of is None)
    retries = sum(1 for item in plan if item.retry_of is not None)
    return " ".join(f"{name}={count}" for name, count in sorted(counts.items())) + f" retries={retries}"


# --- the server, in a process of its own as in production ----------------------------------------


def serve_child(*, database_url: str, slack_api_url: str) -> None:
    """Child process: the real app and waitress server with the lab diagnoser; prints its port."""
    from bot.config import Settings
    from bot.lab.demo import minimal_diagnoser
    from bot.lab.slack_api import BOT_TOKEN
    from handlers.ops import server as http_server
    from handlers.slack.app import build_slack_bot, http_app
    from storage import db

    settings = Settings(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack_api_url,
        DATABASE_URL=database_url,
        TRIAGE_SCHEDULER_ENABLED=False,
    )
    db.upgrade(url=database_url)
    bot = build_slack_bot(settings=settings, diagnoser=minimal_diagnoser, diagnoser_label="minimal demo cluster")
    server = http_server.create_server(wsgi_app=http_app(bot), host="127.0.0.1", port=0)
    print(f"PORT {server.effective_port}", flush=True)
    server.run()


def start_server(
    *, database_url: str, slack_api_url: str, deadline: float
) -> tuple[subprocess.Popen[str], str]:
    """Spawn `serve_child` and wait (bounded) for its port."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-child", database_url, slack_api_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("PORT "):
            return process, f"http://127.0.0.1:{int(line.split()[1])}"
        if not line and process.poll() is not None:
            break
    process.kill()
    raise SystemExit("the server did not start")


# --- the load ------------------------------------------------------------------------------------------


def send_one(*, session: requests.Session, url: str, command: PlannedCommand) -> Sent:
    """One signed POST to /slack/events, timed from send to ack."""
    body = form_body(command=command)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        **signature_headers(body=body, secret=SIGNING_SECRET),
    }
    if command.retry_of is not None:
        headers.update({"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    started = time.perf_counter()
    try:
        response = session.post(
            f"{url}/slack/events", data=body.encode(), headers=headers, timeout=ACK_LIMIT_S * 2
        )
        return Sent(command=command, status=response.status_code, ack_seconds=time.perf_counter() - started)
    except requests.RequestException as error:
        elapsed = time.perf_counter() - started
        return Sent(command=command, status=0, ack_seconds=elapsed, error=type(error).__name__)


def fire(*, url: str, plan: Sequence[PlannedCommand], concurrency: int) -> list[Sent]:
    """Send every planned command, `concurrency` at a time, each worker on its own keep-alive session."""
    local = threading.local()
    sessions: list[requests.Session] = []
    lock = threading.Lock()

    def send(command: PlannedCommand) -> Sent:
        if not hasattr(local, "session"):
            local.session = requests.Session()
            with lock:
                sessions.append(local.session)
        return send_one(session=local.session, url=url, command=command)

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(send, plan))
    finally:
        for session in sessions:
            session.close()


def handled_commands(*, url: str) -> float:
    """Commands the server finished (any outcome, refusals at the ack included), from /metrics."""
    text = requests.get(f"{url}/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("triage_commands_total{")
    )


def wait_until_handled(*, url: str, expected: float, deadline: float) -> float:
    """Poll /metrics until every request has an outcome, or the deadline passes (bounded)."""
    handled = 0.0
    while time.monotonic() < deadline:
        handled = handled_commands(url=url)
        if handled >= expected:
            return handled
        time.sleep(0.2)
    return handled


def expected_incidents(plan: Sequence[PlannedCommand]) -> int:
    """Distinct workloads named by valid `job` commands: one incident each, however often named."""
    from bot.evidence.targets import InvalidTarget, parse_target

    workloads = set()
    for item in plan:
        name, _, rest = item.text.partition(" ")
        if name != "job":
            continue
        try:
            workloads.add(parse_target(rest).workload_key)
        except InvalidTarget:
            continue
    return len(workloads)


def count_incidents(*, database_url: str) -> int:
    """Rows in the incident table, read straight from the database."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(sqlalchemy.text("SELECT COUNT(*) FROM incident")).scalar_one())
    finally:
        engine.dispose()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options; defaults are the issue's: 200 commands."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200, help="how many /triage requests to send")
    parser.add_argument(
        "--concurrency", type=int, default=0, help="requests in flight at once (default: all of them)"
    )
    parser.add_argument("--targets", type=int, default=40, help="distinct workloads the job commands name")
    parser.add_argument(
        "--retry-share", type=float, default=0.05, help="share of requests that are Slack retries"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds before the run gives up")
    args = parser.parse_args(argv)
    args.commands = max(1, min(args.commands, 20_000))
    args.concurrency = max(1, min(args.concurrency or args.commands, 512))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every promise held, 1 otherwise."""
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["--serve-child"]:
        serve_child(database_url=raw[1], slack_api_url=raw[2])
        return 0
    args = parse_args(raw)
    from bot.lab.slack_api import SlackApiStandIn

    plan = plan_commands(
        total=args.commands, distinct_targets=args.targets, retry_share=args.retry_share, seed=args.seed
    )
    deadline = time.monotonic() + args.deadline
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"plan: {len(plan)} commands, {args.concurrency} in flight ({describe_mix(plan)})")
    with tempfile.TemporaryDirectory() as tmp, SlackApiStandIn() as slack:
        database_url = args.database_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        server, url = start_server(database_url=database_url, slack_api_url=slack.base_url, deadline=deadline)
        try:
            warm_up = [
                dataclasses.replace(item, text="help", trigger_id=f"warm.{item.index}") for item in plan[:20]
            ]
            fire(url=url, plan=warm_up, concurrency=4)
            warm = wait_until_handled(url=url, expected=len(warm_up), deadline=deadline)
            slack.clear()
            started = time.perf_counter()
            sent = fire(url=url, plan=plan, concurrency=args.concurrency)
            acked_in = time.perf_counter() - started
            handled = wait_until_handled(url=url, expected=warm + len(plan), deadline=deadline) - warm
            drained_in = time.perf_counter() - started
        finally:
            server.terminate()
            server.wait(timeout=20)
        incidents = count_incidents(database_url=database_url)
        posts = slack.calls_to("chat.postMessage")
    top_level = [call for call in posts if "thread_ts" not in call.params]
    # An incident's root message starts with its key; other top-level posts are replies that came
    # before the root existed (a note racing the job), which the bot posts in the channel instead.
    roots = Counter(
        match.group(0) for call in top_level if (match := ROOT_TEXT.match(str(call.params.get("text", ""))))
    )
    doubled = sum(count - 1 for count in roots.values())
    latency = summarise_latency(sent)
    errors = Counter(item.error or str(item.status) for item in sent if item.status != 200)
    wanted = expected_incidents(plan)
    print(
        f"ack latency ms: p50={latency.get('p50_ms', 0):.1f} p95={latency.get('p95_ms', 0):.1f} "
        f"p99={latency.get('p99_ms', 0):.1f} max={latency.get('max_ms', 0):.1f} "
        f"mean={latency.get('mean_ms', 0):.1f}"
    )
    print(
        f"acked {len(sent) - sum(errors.values())}/{len(sent)} in {acked_in:.2f} s; "
        f"all work done after {drained_in:.2f} s"
    )
    print(f"commands completed: {int(handled)}/{len(plan)}")
    print(
        f"incidents created: {incidents} (expected {wanted}); root messages: {sum(roots.values())} "
        f"({doubled} duplicated); messages posted: {len(posts)} ({len(top_level) - sum(roots.values())} "
        "top-level replies before their root existed)"
    )
    print(f"errors: {dict(errors) or 0}")
    checks = {
        "every ack under 3 s": bool(latency) and latency["max_ms"] < ACK_LIMIT_S * 1000,
        "p99 under 100 ms": bool(latency) and latency["p99_ms"] < P99_TARGET_S * 1000,
        "no command lost": int(handled) == len(plan) and not errors,
        "no incident lost or duplicated": incidents == wanted and len(roots) == incidents and not doubled,
    }
    for name, held in checks.items():
        print(f"  {'PASS' if held else 'FAIL'}  {name}")
    print(
        f"ratios: max/3 s budget={latency.get('max_ms', 0) / (ACK_LIMIT_S * 1000):.3f}  "
        f"p99/100 ms target={latency.get('p99_ms', 0) / (P99_TARGET_S * 1000):.2f}"
    )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
