"""The real consumer of /metrics: Debian's Prometheus scrapes a running `triage-bot serve` and can query it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from bot.lab.slack_api import SlackApiStandIn
from tests.support.prometheus import PROMETHEUS, binary, free_port, running
from tests.support.serve_process import start_serve


@pytest.fixture
def served(tmp_path: Path, slack_stand_in: SlackApiStandIn) -> Iterator[str]:
    process, url = start_serve(
        slack_base_url=slack_stand_in.base_url, database_url=f"sqlite:///{tmp_path / 'scraped.db'}", cwd=tmp_path,
        stderr=subprocess.DEVNULL,
        extra_env={"TRIAGE_SCHEDULER_ENABLED": "false", "TRIAGE_ALERTS_TOKEN": "scrape-token-0123456789abcdef"})
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _query(base: str, expression: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{base}/api/v1/query", params={"query": expression}, timeout=10).json()
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def test_prometheus_scrapes_serve_and_finds_the_triage_series(tmp_path: Path, served: str) -> None:
    executable = binary(PROMETHEUS)
    port = free_port()
    target = served.removeprefix("http://")
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "triage-bot", "static_configs": [{"targets": [target]}]}]}
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    base = f"http://127.0.0.1:{port}"
    argv = [executable, f"--config.file={path}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}"]
    with running(argv, ready_url=f"{base}/-/ready", log=tmp_path / "prometheus.log"):
        stop = time.monotonic() + 60
        up: list[dict[str, Any]] = []
        while time.monotonic() < stop:
            up = _query(base, 'up{job="triage-bot"}')
            if up and up[0]["value"][1] == "1":
                break
            time.sleep(0.5)
        assert up and up[0]["value"][1] == "1", up
        (health,) = requests.get(f"{base}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
        assert health["health"] == "up" and health["lastError"] == ""
        names = {item["metric"]["__name__"] for item in _query(base, '{__name__=~"triage_.+", job="triage-bot"}')}
        assert {"triage_alert_queue_depth", "triage_ack_latency_seconds_count"} <= names
        assert _query(base, "triage_alert_queue_depth")[0]["value"][1] == "0"
