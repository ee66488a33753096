"""Work still running after a request was acknowledged, counted so shutdown, tests and the demo can wait."""

from __future__ import annotations

import threading


class WorkTracker:
    """Counts slow work still running after an ack."""

    def __init__(self) -> None:
        self._pending = 0
        self._idle = threading.Condition()

    def begin(self) -> None:
        """Called when a request is acked with work still to do."""
        with self._idle:
            self._pending += 1

    def end(self) -> None:
        """Called when that work finished (whatever the outcome)."""
        with self._idle:
            self._pending = max(0, self._pending - 1)
            self._idle.notify_all()

    def wait_idle(self, *, timeout: float = 30.0) -> bool:
        """Block until no work is pending; False if `timeout` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)
