"""`triage-bot serve` in a real process: the same server answers signed Slack requests and probes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.lab.slack_api import BOT_TOKEN, SlackApiStandIn
from tests.support.paths import ROOT
from tests.support.serve_process import start_serve
from tests.support.slack import sign, slash_body


@pytest.fixture
def served(tmp_path: Path, slack_stand_in: SlackApiStandIn) -> Iterator[str]:
    process, url = start_serve(
        slack_base_url=slack_stand_in.base_url,
        database_url=f"sqlite:///{tmp_path / 'served.db'}",
        cwd=tmp_path,
        extra_env={"TRIAGE_SCHEDULER_ENABLED": "false"},
        stderr=subprocess.DEVNULL,
    )
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_serve_answers_signed_commands_and_probes_on_one_port(
    served: str, slack_stand_in: SlackApiStandIn
) -> None:
    body = slash_body(text="job ml/served")
    headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(body=body)}
    response = requests.post(f"{served}/slack/events", data=body.encode(), headers=headers, timeout=10)
    assert response.status_code == 200
    assert slack_stand_in.wait_for(
        # No kubeconfig in this process: the incident opens and the thread says why no snapshot was taken.
        lambda calls: any(
            "No snapshot was taken" in str(call.params.get("text")) and "KUBECONFIG" in str(call.params.get("text"))
            for call in calls
        ),
        timeout=30,
    )
    roots = [c for c in slack_stand_in.calls_to("chat.postMessage") if "thread_ts" not in c.params]
    assert len(roots) == 1 and "INC-0001" in str(roots[0].params["text"])
    assert requests.get(f"{served}/readyz", timeout=10).json()["ready"] is True
    assert "triage_commands_total" in requests.get(f"{served}/metrics", timeout=10).text
    forged = {"Content-Type": "application/x-www-form-urlencoded", **sign(body=body, secret="wrong")}
    assert (
        requests.post(f"{served}/slack/events", data=body.encode(), headers=forged, timeout=10).status_code
        == 401
    )


def test_serve_in_socket_mode_with_a_refused_app_token_says_what_to_fix(
    tmp_path: Path, slack_stand_in: SlackApiStandIn
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": "xapp-1-not-accepted",
        "SLACK_API_URL": slack_stand_in.base_url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'socket.db'}",
    }
    env.pop("SLACK_SIGNING_SECRET", None)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from handlers.main import main; main()",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "SLACK_APP_TOKEN" in result.stderr and "connections:write" in result.stderr
    assert "Traceback" not in result.stderr
    opened = slack_stand_in.calls_to("apps.connections.open")
    assert opened and opened[0].token == "xapp-1-not-accepted"
