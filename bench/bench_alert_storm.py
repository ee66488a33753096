"""Benchmark: an alert storm through the real intake (one builder, waitress, SQLite, Slack stand-in).

Sends, with the bearer token, as Alertmanager would:
  1. one notification of N KubePodCrashLooping alerts for the pods of one Job (kube-state-metrics labels),
  2. the same notification R more times (Alertmanager's repeat_interval / group_interval re-sends),
  3. N alerts for the same Job split over B notifications (new pods of the job, arriving in batches),
  4. the whole storm resolved;
and prints the incidents opened, root messages posted, the HTTP answer time (Alertmanager waits for it),
the time from the first notification to the root message, and the worker's time per notification.

Run: PYTHONPATH=$PWD python3 bench/bench_alert_storm.py [--alerts 500 --repeats 10 --batches 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import SlackApiStandIn
from tests.bot.alerts.payloads import notification, pod_storm
from tests.support.slack import lab_settings, make_bot, serving

TOKEN = "bench-alerts-token-0123456789abcdef"
RULES = """
channel: C0ALERTS
rules:
  - {name: workloads, match_re: {alertname: "KubePodCrashLooping"}, action: open, severity: high}
"""


def _post(session: requests.Session, url: str, payload: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = session.post(url, data=json.dumps(payload), timeout=30,
                            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--alerts", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-alerts-"))
    (folder / "rules.yaml").write_text(RULES, encoding="utf-8")
    url_db = f"sqlite:///{folder / 'bench.db'}"
    with SlackApiStandIn() as slack:
        settings = lab_settings(database_url=url_db, slack=slack).model_copy(
            update={"alerts_token": TOKEN, "alerts_rules_path": folder / "rules.yaml", "alerts_queue_size": 256})
        bot = make_bot(database_url=url_db, slack=slack, diagnoser=minimal_diagnoser, settings=settings)
        with serving(bot, slack=slack) as running, requests.Session() as session:
            url = f"{running.server.url}/alerts/alertmanager"
            storm = notification(*pod_storm(count=args.alerts))
            answers = []
            first_sent = time.perf_counter()
            answers.append(_post(session, url, storm))
            assert slack.wait_for(lambda calls: any("thread_ts" not in c.params for c in calls
                                                    if c.method == "chat.postMessage"), timeout=60)
            root_after = time.perf_counter() - first_sent
            running.services.work.wait_idle(timeout=120)
            for _ in range(args.repeats):
                answers.append(_post(session, url, storm))
            more = pod_storm(count=args.alerts, job="train-llm")
            for item in more:
                item["labels"]["pod"] += "-b"
                item["fingerprint"] = item["fingerprint"][::-1]
            size = max(1, len(more) // args.batches)
            for start in range(0, len(more), size):
                answers.append(_post(session, url, notification(*more[start:start + size])))
            resolved = [dict(item, status="resolved", endsAt="2026-03-01T11:00:00Z") for item in
                        pod_storm(count=args.alerts) + more]
            answers.append(_post(session, url, notification(*resolved)))
            running.services.work.wait_idle(timeout=300)
            total = time.perf_counter() - first_sent
            incidents = running.services.incidents
            opened = incidents.list_open()
            roots = [c for c in slack.calls_to("chat.postMessage") if "thread_ts" not in c.params]
            metrics = session.get(f"{running.server.url}/metrics", timeout=10).text
            root_metric = next(line for line in metrics.splitlines() if line.startswith("triage_alert_root_seconds_sum"))
            timeline = incidents.timeline(opened[0].key) if opened else []
    sent = args.alerts * (1 + args.repeats) + len(more) + len(resolved)
    print(f"notifications: {len(answers)}  alerts sent: {sent}  distinct alerts: {args.alerts + len(more)}")
    print(f"incidents opened: {len(opened)}  root messages: {len(roots)}  "
          f"thread replies: {len(slack.calls_to('chat.postMessage')) - len(roots)}")
    print(f"HTTP answer: median {statistics.median(answers) * 1000:.1f} ms, max {max(answers) * 1000:.1f} ms")
    print(f"first notification ({args.alerts} alerts) -> root message: {root_after * 1000:.0f} ms "
          f"(server-side {float(root_metric.split()[-1]) * 1000:.0f} ms)")
    print(f"whole run (processing, one snapshot, resolution): {total:.2f} s")
    print(f"timeline: {', '.join(item.kind for item in timeline)}")


if __name__ == "__main__":
    main()
