"""A cluster's snapshot slots: N at once, N more waiting, and a clear refusal past that."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from bot.clusters.gate import ClusterBusy, Gate
from bot.evidence.report import SnapshotUnavailable


def _hold_in_thread(gate: Gate, release: threading.Event) -> threading.Thread:
    entered = threading.Event()

    def hold() -> None:
        with gate.hold(wait_seconds=5):
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert entered.wait(5)
    return thread


def test_a_snapshot_waits_for_a_free_slot_and_then_runs() -> None:
    gate, release = Gate(name="east", limit=1), threading.Event()
    holder = _hold_in_thread(gate, release)
    ran = threading.Event()

    def wait_then_run() -> None:
        with gate.hold(wait_seconds=5):
            ran.set()

    waiter = threading.Thread(target=wait_then_run, daemon=True)
    waiter.start()
    _until(lambda: gate.waiting == 1)
    assert not ran.is_set() and gate.running == 1
    release.set()
    holder.join(5)
    waiter.join(5)
    assert ran.is_set()


def test_no_slot_within_the_wait_is_a_clear_busy_refusal() -> None:
    gate, release = Gate(name="west", limit=1), threading.Event()
    holder = _hold_in_thread(gate, release)
    with pytest.raises(ClusterBusy, match="cluster west is busy") as refused, gate.hold(wait_seconds=0.05):
        pass
    assert isinstance(refused.value, SnapshotUnavailable)  # the thread says "No snapshot was taken: ..."
    release.set()
    holder.join(5)
    assert gate.running == 0 and gate.waiting == 0


def test_a_full_queue_refuses_at_once_instead_of_holding_another_thread() -> None:
    gate, release = Gate(name="slow", limit=1), threading.Event()
    holder = _hold_in_thread(gate, release)
    queued = threading.Thread(target=lambda: _try(gate), daemon=True)
    queued.start()
    _until(lambda: gate.waiting == 1)
    with pytest.raises(ClusterBusy, match="1 snapshots running and 1 waiting"), gate.hold(wait_seconds=30):
        pass
    release.set()
    holder.join(5)
    queued.join(5)


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "the gate never reached the expected state"
        time.sleep(0.005)


def _try(gate: Gate) -> None:
    try:
        with gate.hold(wait_seconds=10):
            pass
    except ClusterBusy:
        pass
