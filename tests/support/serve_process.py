"""Start `triage-bot serve` in a real process on an ephemeral port, the way an operator would."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from bot.lab.slack_api import BOT_TOKEN
from tests.support.slack import SIGNING_SECRET

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_CLI = "from handlers.main import main; main()"


def start_serve(
    *,
    slack_base_url: str,
    database_url: str,
    cwd: Path,
    extra_env: dict[str, str] | None = None,
    launch: str = LAUNCH_CLI,
    stderr: int = subprocess.STDOUT,
) -> tuple[subprocess.Popen[str], str]:
    """Run `serve` on 127.0.0.1:0 against the Slack stand-in; return the process and its base URL.

    HTTP mode unless `extra_env` sets SLACK_APP_TOKEN (Socket Mode: the URL serves health and metrics).
    stdout keeps being drained after the address is read, so a chatty server never blocks on a full pipe.
    """
    env = {
        **{name: value for name, value in os.environ.items() if name != "SLACK_APP_TOKEN"},
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack_base_url,
        "DATABASE_URL": database_url,
        **(extra_env or {}),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", launch, "serve", "--host", "127.0.0.1", "--port", "0"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    lines: list[str] = []
    address: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if ("HTTP mode" in line or "Socket Mode;" in line) and not address:
                address.append(line.rsplit("http://", 1)[1].strip())
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(timeout=60)
    if not address:
        process.kill()
        raise AssertionError("serve did not report its address: " + "".join(lines[-20:]))
    return process, f"http://{address[0]}"
