"""Load benchmark: N concurrent signed `/triage` commands against the real server on loopback.

Prints ack latency (p50/p95/p99/max), commands completed, incidents created, messages posted and
errors, and checks the promises: every ack under Slack's 3 s, p99 under 100 ms, no command lost
or duplicated. Everything is bounded: a fixed number of requests, per-request timeouts and one
overall deadline, so the benchmark always stops by itself.

    PYTHONPATH=$PWD python3 bench/bench_load.py --commands 200 --concurrency 16
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import hmac
import random
import statistics
import time
import urllib.parse
from collections import Counter
from collections.abc import Sequence

SIGNING_SECRET = "bench-signing-secret"
TEAM_ID = "T0LAB"
ACK_LIMIT_S = 3.0
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


def form_body(*, command: PlannedCommand, response_url: str) -> bytes:
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
        "response_url": response_url,
        "trigger_id": command.trigger_id,
    }
    return urllib.parse.urlencode(fields).encode()


def signed_headers(*, body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's v0 signature: HMAC-SHA256 over `v0:<timestamp>:<body>`."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }


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


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options; defaults are the issue's: 200 commands."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200, help="how many /triage requests to send")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at once")
    parser.add_argument("--targets", type=int, default=40, help="distinct workloads the job commands name")
    parser.add_argument(
        "--retry-share", type=float, default=0.05, help="share of requests that are Slack retries"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file in a temp dir")
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds before the run gives up")
    args = parser.parse_args(argv)
    args.commands = max(1, min(args.commands, 20_000))
    args.concurrency = max(1, min(args.concurrency, 512))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every promise held, 1 otherwise."""
    args = parse_args(argv)
    plan = plan_commands(
        total=args.commands, distinct_targets=args.targets, retry_share=args.retry_share, seed=args.seed
    )
    print(f"plan: {len(plan)} commands ({describe_mix(plan)})")
    raise SystemExit("the server half of this benchmark lands with the foundation merge")


if __name__ == "__main__":
    raise SystemExit(main())
