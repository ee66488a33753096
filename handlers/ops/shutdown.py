"""Graceful stop on SIGTERM/SIGINT: stop taking requests, let in-flight snapshots finish within a grace
period, record what is still running as interrupted, stop the scheduler, exit 0."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable

from bot.core import Core
from handlers.ops.work import WorkTracker

log = logging.getLogger(__name__)


def stop_event_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT (installed from the main thread)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def drain(*, core: Core, work: WorkTracker, stop_accepting: Callable[[], None], grace_seconds: float) -> list[str]:
    """Stop intake, wait up to `grace_seconds` for acked work, then mark this process's unfinished
    snapshots interrupted and stop the scheduler. Returns the incident keys marked interrupted."""
    started = time.monotonic()
    try:
        stop_accepting()
    except Exception:
        log.warning("closing the listener failed", exc_info=True)
    finished = work.wait_idle(timeout=grace_seconds)
    interrupted: list[str] = []
    if not finished:
        try:
            interrupted = core.incidents.interrupt_running_snapshots(instance_id=core.settings.instance_id)
        except Exception:
            log.exception("could not record interrupted snapshots; the next start will")
        for key in interrupted:
            log.warning("snapshot still running at shutdown recorded as interrupted", extra={"incident": key})
    if core.scheduler.running:
        core.scheduler.shutdown(wait=False)
    log.info(
        "shutdown complete",
        extra={
            "drained": finished,
            "interrupted": interrupted,
            "elapsed_seconds": round(time.monotonic() - started, 3),
        },
    )
    return interrupted
