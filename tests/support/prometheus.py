"""Debian's `prometheus-alertmanager` and `prometheus`, started by a test on ephemeral loopback ports and
stopped by PID (never by name). Tests skip, saying what to install, where a binary is absent."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

# (environment override, names on PATH): Debian calls Alertmanager `prometheus-alertmanager`.
ALERTMANAGER = ("TRIAGE_TEST_ALERTMANAGER", ("prometheus-alertmanager", "alertmanager"))
PROMETHEUS = ("TRIAGE_TEST_PROMETHEUS", ("prometheus",))


def binary(which: tuple[str, tuple[str, ...]]) -> str:
    """The binary's path, or skip the test naming the Debian package (.ci/setup.d/50-prometheus.sh installs it)."""
    variable, names = which
    found = os.environ.get(variable) or next((path for name in names if (path := shutil.which(name))), None)
    if not found:
        pytest.skip(f"{' / '.join(names)} not installed: `apt-get install prometheus prometheus-alertmanager` "
                    f"(.ci/setup.d/50-prometheus.sh does it in CI) or set {variable}")
    return found


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(url: str, *, timeout: float = 30.0) -> None:
    """Poll `url` until it answers 200 (bounded)."""
    stop = time.monotonic() + timeout
    last = ""
    while time.monotonic() < stop:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException as error:
            last = type(error).__name__
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer 200 within {timeout}s ({last})")


@contextlib.contextmanager
def running(argv: list[str], *, ready_url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start one daemon, wait for its readiness URL, and stop exactly that PID afterwards."""
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            try:
                wait_until(ready_url)
            except AssertionError as error:
                raise AssertionError(f"{error}; log: {log.read_text(errors='replace')[-2000:]}") from None
            yield process
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(timeout=15)
