"""The whole path with the real parts: Debian's Alertmanager, configured with a webhook receiver (bearer token)
pointing at a real `triage-bot serve` process, fed alerts through its own API (`POST /api/v2/alerts`).

Alert fires -> one incident (a storm of pod alerts, and a GPU Xid alert for a node) -> the bot's snapshot is
posted -> the alerts resolve -> the timeline says so and the bot suggests resolving.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from bot.incidents.service import IncidentService
from bot.lab.slack_api import SlackApiStandIn
from storage import db
from tests.bot.alerts.payloads import RULES
from tests.support.kube_lab import Lab, running_lab
from tests.support.prometheus import ALERTMANAGER, binary, free_port, running
from tests.support.serve_process import start_serve

TOKEN = "live-alerts-token-0123456789abcdef"
STORM = 40


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as started:
        yield started


@pytest.fixture
def served(tmp_path: Path, slack_stand_in: SlackApiStandIn, lab: Lab) -> Iterator[tuple[str, str]]:
    """`triage-bot serve` with the alert intake on, reading the lab cluster; (base URL, database URL)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    database = f"sqlite:///{tmp_path / 'live.db'}"
    process, url = start_serve(
        slack_base_url=slack_stand_in.base_url, database_url=database, cwd=tmp_path, stderr=subprocess.DEVNULL,
        extra_env={"TRIAGE_SCHEDULER_ENABLED": "false", "TRIAGE_ALERTS_TOKEN": TOKEN,
                   "TRIAGE_ALERTS_RULES": str(rules), "KUBECONFIG": str(lab.kubeconfig)})
    try:
        yield url, database
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def alertmanager(tmp_path: Path, served: tuple[str, str]) -> Iterator[str]:
    """Alertmanager on an ephemeral port, its only receiver the bot's webhook with a bearer token."""
    executable = binary(ALERTMANAGER)
    port = free_port()
    config = {
        "route": {"receiver": "triage-bot", "group_by": ["alertname", "namespace", "Hostname"],
                  "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "triage-bot", "webhook_configs": [{
            "url": f"{served[0]}/alerts/alertmanager", "send_resolved": True,
            "http_config": {"authorization": {"type": "Bearer", "credentials": TOKEN}}}]}],
    }
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    storage = tmp_path / "alertmanager-data"
    storage.mkdir()
    argv = [executable, f"--config.file={path}", f"--storage.path={storage}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=info"]
    base = f"http://127.0.0.1:{port}"
    with running(argv, ready_url=f"{base}/-/ready", log=tmp_path / "alertmanager.log"):
        yield base


def _post_alerts(alertmanager: str, alerts: list[dict[str, Any]]) -> None:
    response = requests.post(f"{alertmanager}/api/v2/alerts", json=alerts, timeout=10)
    assert response.status_code == 200, response.text


def _wait(check: Callable[[], bool], *, what: str, timeout: float = 90.0) -> None:
    stop = time.monotonic() + timeout
    while time.monotonic() < stop:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _alerts(*, ends: datetime | None = None) -> list[dict[str, Any]]:
    end = {"endsAt": ends.isoformat().replace("+00:00", "Z")} if ends else {}
    storm = [{"labels": {"alertname": "KubePodCrashLooping", "severity": "warning", "namespace": "ml",
                         "pod": f"train-llm-trainer-{index}-0-x{index}k2p",
                         "label_jobset_sigs_k8s_io_jobset_name": "train-llm"},
              "annotations": {"summary": f"Pod ml/train-llm-trainer-{index} is crash looping"},
              "generatorURL": "http://prometheus.example:9090/graph", **end} for index in range(STORM)]
    xid = {"labels": {"alertname": "DCGMXidErrors", "severity": "critical", "Hostname": "gpu-node-05", "gpu": "3",
                      "UUID": "GPU-5c1e0e5a-7b9c-4f5e-9d7e-1a2b3c4d5e6f"},
           "annotations": {"summary": "GPU 3 on gpu-node-05 reported Xid 79"}, **end}
    return [*storm, xid]


def test_alertmanager_alerts_open_one_incident_per_target_get_a_snapshot_and_resolve_on_the_timeline(
    alertmanager: str, served: tuple[str, str], slack_stand_in: SlackApiStandIn
) -> None:
    engine = db.make_engine(url=served[1])
    incidents = IncidentService(engine=engine, diagnoser=None)
    try:
        _post_alerts(alertmanager, _alerts())

        def snapshotted() -> bool:
            opened = incidents.list_open()
            return len(opened) == 2 and all(incidents.snapshots(incident_key=item.key) for item in opened)

        _wait(snapshotted, what="two incidents with a snapshot each")
        by_target = {item.target: item for item in incidents.list_open()}
        assert set(by_target) == {"jobset/ml/train-llm", "node:gpu-node-05"}  # 41 alerts, one incident per target
        node = by_target["node:gpu-node-05"]
        assert node.opened_by == "triage-bot" and node.channel_id == "C0ALERTS"
        roots = [call for call in slack_stand_in.calls_to("chat.postMessage") if "thread_ts" not in call.params]
        assert len(roots) == 2
        assert any("DCGMXidErrors" in json.dumps(call.params) for call in roots)

        def findings_posted() -> bool:  # the snapshot is stored before its findings are posted in the thread
            return any("runtime.gpu-lost" in json.dumps(call.params) and call.params.get("thread_ts") == node.thread_ts
                       for call in slack_stand_in.calls_to("chat.postMessage"))

        _wait(findings_posted, what="the node's findings in its incident thread")

        _post_alerts(alertmanager, _alerts(ends=datetime.now(UTC) - timedelta(seconds=5)))

        def all_resolved() -> bool:
            return all(incidents.timeline(item.key)[-1].kind == "alerts_all_resolved" for item in by_target.values())

        _wait(all_resolved, what="every alert resolved on both timelines")
        storm_timeline = incidents.timeline(by_target["jobset/ml/train-llm"].key)
        resolved = [item for item in storm_timeline if item.kind == "alert_resolved"]
        assert resolved and "KubePodCrashLooping" in resolved[0].text
        assert f"({STORM})" in storm_timeline[-1].text
        assert any("Every alert" in str(call.params.get("text")) for call in slack_stand_in.calls_to("chat.postMessage"))
    finally:
        engine.dispose()
