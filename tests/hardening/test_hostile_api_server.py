"""A hostile Kubernetes API server is bounded on our side: a list that ignores `limit`, a log that ignores
`limitBytes` and an answer dripping a byte at a time cost a capped amount of memory and end at the deadline,
a step abandoned at the deadline does not keep the process alive, and an answer of the wrong shape is refused
by name (the collectors read wire JSON, not the client's models, so the shape is checked where it is read)."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import SnapshotBounds
from bot.diagnosis.collectors.kube.calls import Caller, build_api_client
from bot.diagnosis.engine import Budget, CollectorFailure, DeadlineExceeded
from tests.support.paths import ROOT

PODS = 20_000
LOG_BYTES = 64 * 1024 * 1024
MEMORY_CEILING = 48 * 1024 * 1024  # what one bounded call may hold at its peak (caps are 8 MiB and 16 KiB)


def _pod(index: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"train-{index}", "namespace": "ml", "annotations": {"pad": "x" * 4000}},
        "spec": {"nodeName": f"gpu-node-{index % 64:02d}", "containers": [{"name": "trainer", "image": "t:1"}]},
        "status": {"phase": "Running"},
    }


class Hostile(http.server.BaseHTTPRequestHandler):
    """Ignores `limit` and `limitBytes`; /drip sends one byte every half second."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: Any) -> None:
        pass

    def _body(self, chunks: Iterator[bytes], *, content_type: str, length: int | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what we want

    def do_GET(self) -> None:
        if "/log" in self.path:
            line = b"step 1200 loss 2.31 NCCL INFO all good\n"
            self._body((line * 1024 for _ in range(LOG_BYTES // (len(line) * 1024))), content_type="text/plain")
        elif "/pods" in self.path:
            def pods() -> Iterator[bytes]:
                yield b'{"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": ['
                for index in range(PODS):
                    yield (b"," if index else b"") + json.dumps(_pod(index)).encode()
                yield b"]}"
            self._body(pods(), content_type="application/json")
        elif "/misshapen/" in self.path:
            body = {"array": b'[{"metadata": {}}]', "not-json": b"<html>proxy error</html>",
                    "items-string": b'{"kind": "PodList", "metadata": {}, "items": "abc"}',
                    "items-of-numbers": b'{"kind": "PodList", "metadata": {}, "items": [1, 2]}'}[self.path.split("?")[0].split("/")[2]]
            self._body(iter([body]), content_type="application/json", length=len(body))
        elif "/drip" in self.path:
            def drip() -> Iterator[bytes]:
                for _ in range(10_000):
                    time.sleep(0.5)
                    yield b" "
            self._body(drip(), content_type="application/json", length=10_000)
        else:
            self.send_error(404)


@pytest.fixture(scope="module")
def hostile_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = tmp_path_factory.mktemp("hostile") / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: hostile\n"
        f"clusters:\n- name: hostile\n  cluster:\n    server: http://127.0.0.1:{server.server_address[1]}\n"
        "contexts:\n- name: hostile\n  context:\n    cluster: hostile\n    user: nobody\n"
        "users:\n- name: nobody\n  user: {}\n",
        encoding="utf-8",
    )
    yield path
    server.shutdown()


def _caller(kubeconfig: Path, **bounds: Any) -> Caller:
    api = build_api_client(kubeconfig=kubeconfig, context=None, in_cluster=False, pool_size=4)
    return Caller(api=api, budget=Budget(bounds=SnapshotBounds(**bounds)))


def _peak(call: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_list_that_ignores_limit_is_cut_at_the_response_cap(hostile_kubeconfig: Path) -> None:
    caller = _caller(hostile_kubeconfig, deadline_seconds=30, call_timeout_seconds=10)

    def listing() -> Exception | None:
        try:
            caller.list_all("/api/v1/namespaces/ml/pods", what="pods")
        except CollectorFailure as failure:
            return failure
        return None

    failure, peak = _peak(listing)
    assert failure is not None and "larger than" in str(failure)
    assert peak < MEMORY_CEILING, f"peak {peak / 1e6:.0f} MB"


def test_a_page_with_more_items_than_asked_is_trimmed_to_the_limit(hostile_kubeconfig: Path) -> None:
    caller = _caller(hostile_kubeconfig, deadline_seconds=30, call_timeout_seconds=10, page_size=50,
                     max_response_bytes=200_000_000)
    items, truncated = caller.list_all("/api/v1/namespaces/ml/pods", what="pods")
    assert len(items) == 50 and truncated


def test_a_log_that_ignores_limit_bytes_is_read_only_up_to_it(hostile_kubeconfig: Path) -> None:
    caller = _caller(hostile_kubeconfig, deadline_seconds=30, call_timeout_seconds=10)
    text, peak = _peak(lambda: caller.get(
        "/api/v1/namespaces/ml/pods/train-0/log", what="logs", text=True,
        query={"limitBytes": 16_384}, max_bytes=16_384,
    ))
    assert 0 < len(text.encode()) <= 16_384
    assert peak < MEMORY_CEILING, f"peak {peak / 1e6:.0f} MB"


def test_an_answer_dripping_a_byte_at_a_time_ends_at_the_deadline(hostile_kubeconfig: Path) -> None:
    caller = _caller(hostile_kubeconfig, deadline_seconds=2, call_timeout_seconds=5)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            caller.get("/drip", what="drip")
        except BaseException as error:  # noqa: BLE001 - recorded for the assertion
            outcome.append(error)

    started = time.monotonic()
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout=15)
    assert not worker.is_alive(), "still reading the drip 15 s after a 2 s deadline"
    assert outcome and isinstance(outcome[0], DeadlineExceeded)
    print(f"drip abandoned after {time.monotonic() - started:.1f} s (deadline 2 s)")


STUCK_SNAPSHOT = """
import threading, time
from bot.config import SnapshotBounds
from bot.diagnosis.engine import Budget, Step, run_snapshot
stuck = threading.Event()
def step(sink):
    stuck.wait()  # a read that never returns
started = time.monotonic()
result = run_snapshot(stages=[lambda: [Step(collector="stuck", run=step)]],
                      budget=Budget(bounds=SnapshotBounds(deadline_seconds=1)))
print(result.reports[0].outcome.value, round(time.monotonic() - started, 1), flush=True)
"""


def test_a_step_abandoned_at_the_deadline_does_not_keep_the_process_alive() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", STUCK_SNAPSHOT], cwd=ROOT, capture_output=True, text=True,
                          timeout=30, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("timeout")
    assert elapsed < 15, f"the process lived {elapsed:.1f} s after a 1 s deadline"


def test_the_drip_server_really_drips(hostile_kubeconfig: Path) -> None:
    """The fixture's own check: without the client's deadline a read would block on the drip."""
    port = int(hostile_kubeconfig.read_text().split("127.0.0.1:")[1].split()[0])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /drip HTTP/1.1\r\nHost: x\r\n\r\n")
        head = sock.recv(4096)
        assert b"Content-Length: 10000" in head


@pytest.mark.parametrize("shape", ["array", "not-json"])
def test_an_answer_that_is_not_a_json_object_is_refused_by_name(hostile_kubeconfig: Path, shape: str) -> None:
    caller = _caller(hostile_kubeconfig, deadline_seconds=10, call_timeout_seconds=5)
    with pytest.raises(CollectorFailure, match="get thing: the answer is not a JSON object"):
        caller.get(f"/misshapen/{shape}", what="get thing")


@pytest.mark.parametrize("shape", ["items-string", "items-of-numbers"])
def test_a_list_whose_items_are_not_objects_is_refused_by_name(hostile_kubeconfig: Path, shape: str) -> None:
    caller = _caller(hostile_kubeconfig, deadline_seconds=10, call_timeout_seconds=5)
    with pytest.raises(CollectorFailure, match="list things: the answer is not a list of objects"):
        caller.list_all(f"/misshapen/{shape}", what="list things")
