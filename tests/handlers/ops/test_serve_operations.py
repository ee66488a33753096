"""`triage-bot serve` as operators see it, in a real process: JSON logs that name the incident,
snapshot and scheduler metrics on /metrics, and a SIGTERM that loses nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from bot.incidents.service import SNAPSHOT_INTERRUPTED, SNAPSHOT_STARTED, IncidentNotFound, IncidentService
from bot.lab.slack_api import SlackApiStandIn
from storage import db
from tests.support.serve_process import start_serve
from tests.support.slack import sign, slash_body

# serve with the demo cluster's diagnoser, slowed by TRIAGE_TEST_DIAGNOSER_DELAY seconds (injected latency).
LAUNCH = """
import os, time
from bot.diagnosis import service
from bot.lab.demo import minimal_diagnoser

def slow_diagnoser(**kwargs):
    time.sleep(float(os.environ["TRIAGE_TEST_DIAGNOSER_DELAY"]))
    return minimal_diagnoser(**kwargs)

service.diagnose = slow_diagnoser  # serve binds the production diagnoser when it starts
from handlers.main import main
from tests.support.paths import ROOT
main()
"""


class ServeProcess:
    """One `serve` process: its URL, its stderr lines, and its database."""

    def __init__(self, *, process: subprocess.Popen[str], url: str, database_url: str) -> None:
        self.process = process
        self.url = url
        self.database_url = database_url
        self.stderr: list[str] = []

    def command(self, text: str) -> None:
        body = slash_body(text=text)
        headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(body=body)}
        response = requests.post(f"{self.url}/slack/events", data=body.encode(), headers=headers, timeout=10)
        assert response.status_code == 200

    def wait_for_stderr(self, predicate: Callable[[str], bool], *, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(predicate(line) for line in list(self.stderr)):
                return True
            time.sleep(0.1)
        return False

    def timeline_kinds(self, key: str) -> list[str]:
        engine = db.make_engine(url=self.database_url)
        try:
            return [item.kind for item in IncidentService(engine=engine, diagnoser=None).timeline(key)]
        except IncidentNotFound:
            return []  # not opened yet
        finally:
            engine.dispose()


@pytest.fixture
def launch(tmp_path: Path, slack_stand_in: SlackApiStandIn) -> Iterator[Callable[..., ServeProcess]]:
    started: list[ServeProcess] = []

    def start(*, delay: float = 0.0, grace: float = 25.0) -> ServeProcess:
        database_url = f"sqlite:///{tmp_path / f'serve{len(started)}.db'}"
        process, url = start_serve(
            slack_base_url=slack_stand_in.base_url,
            database_url=database_url,
            cwd=tmp_path,
            extra_env={
                "TRIAGE_SCHEDULER_POLL_SECONDS": "0.2",
                "TRIAGE_SHUTDOWN_GRACE_SECONDS": str(grace),
                "TRIAGE_TEST_DIAGNOSER_DELAY": str(delay),
            },
            launch=LAUNCH,
            stderr=subprocess.PIPE,
        )
        served = ServeProcess(process=process, url=url, database_url=database_url)

        def read_stderr() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                served.stderr.append(line.rstrip("\n"))

        threading.Thread(target=read_stderr, daemon=True).start()
        started.append(served)
        return served

    yield start
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait(timeout=20)


def test_every_log_line_is_json_and_lines_about_the_incident_carry_its_key(
    launch: Callable[..., ServeProcess],
) -> None:
    served = launch()
    served.command("job ml/train-llama")
    assert served.wait_for_stderr(lambda line: "/triage job handled" in line), served.stderr[-5:]
    records = [json.loads(line) for line in served.stderr if line.strip()]  # every line parses
    handled = next(record for record in records if "/triage job handled" in record["event"])
    assert handled["incident"] == "INC-0001"
    assert handled["subcommand"] == "job" and handled["slack_user"] == "U0ALICE"
    assert handled["request_id"].startswith("cmd:") and handled["outcome"] == "ok"
    taken = next(record for record in records if record["event"] == "snapshot taken")
    assert taken["incident"] == "INC-0001" and taken["findings"] >= 1  # logged from the lazy worker thread
    about_it = [record for record in records if "INC-0001" in json.dumps(record)]
    assert about_it and all(record.get("incident") == "INC-0001" for record in about_it)


def test_metrics_show_the_snapshot_its_collectors_and_scheduled_job_runs(
    launch: Callable[..., ServeProcess],
) -> None:
    served = launch()
    served.command("job ml/train-llama")
    assert served.wait_for_stderr(lambda line: "/triage job handled" in line)
    # The daily prune of processed requests is queued at start and due at once.
    assert served.wait_for_stderr(lambda line: "prune_processed_requests" in line and '"ran"' not in line)
    metrics = requests.get(f"{served.url}/metrics", timeout=10).text
    assert "triage_snapshot_duration_seconds_count 1.0" in metrics
    collector_lines = [
        line for line in metrics.splitlines() if line.startswith("triage_collector_outcomes_total{")
    ]
    assert collector_lines and all('collector="' in line and 'outcome="' in line for line in collector_lines)
    assert 'triage_scheduler_job_runs_total{kind="prune_processed_requests",outcome="ok"} 1.0' in metrics


def test_sigterm_mid_snapshot_lets_it_finish_within_the_grace_period(
    launch: Callable[..., ServeProcess],
) -> None:
    served = launch(delay=3.0, grace=30.0)
    served.command("job ml/train-llama")
    assert _wait_until(lambda: SNAPSHOT_STARTED in served.timeline_kinds("INC-0001"))
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=60) == 0
    kinds = served.timeline_kinds("INC-0001")
    assert "snapshot" in kinds and SNAPSHOT_INTERRUPTED not in kinds
    assert any(
        json.loads(line).get("drained") is True for line in served.stderr if "shutdown complete" in line
    )


def test_sigterm_past_the_grace_period_records_the_snapshot_as_interrupted(
    launch: Callable[..., ServeProcess],
) -> None:
    served = launch(delay=600.0, grace=1.0)
    served.command("job ml/train-llama")
    assert _wait_until(lambda: SNAPSHOT_STARTED in served.timeline_kinds("INC-0001"))
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=60) == 0  # a 600 s snapshot does not hold the process
    kinds = served.timeline_kinds("INC-0001")
    assert kinds[-1] == SNAPSHOT_INTERRUPTED and "snapshot" not in kinds
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{served.url}/healthz", timeout=5)


def _wait_until(condition: Callable[[], bool], *, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False
