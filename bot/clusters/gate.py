"""At most N snapshots at once against one cluster, and at most N more waiting: a slow cluster holds its own
slots and never the threads other clusters' snapshots need."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from bot.evidence.report import SnapshotUnavailable


class ClusterBusy(SnapshotUnavailable):
    """Every slot of this cluster is taken and its queue is full (or the wait ran out); try again shortly."""


class Gate:
    """One cluster's snapshot slots, with a bounded queue in front of them."""

    def __init__(self, *, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._running = 0
        self._waiting = 0
        self._refused = 0

    @property
    def running(self) -> int:
        """Snapshots holding a slot now."""
        with self._lock:
            return self._running

    @property
    def waiting(self) -> int:
        """Snapshots queued for a slot now."""
        with self._lock:
            return self._waiting

    @property
    def refused(self) -> int:
        """Snapshots refused as busy since start (a counter for the metrics)."""
        with self._lock:
            return self._refused

    @contextlib.contextmanager
    def hold(self, *, wait_seconds: float) -> Iterator[None]:
        """Run the block in one of this cluster's slots; ClusterBusy when none frees up in time."""
        with self._lock:
            if self._waiting >= self.limit and self._running >= self.limit:
                self._refused += 1
                raise ClusterBusy(f"cluster {self.name} already has {self._running} snapshots running and "
                                  f"{self._waiting} waiting; try again in a minute")
            self._waiting += 1
        try:
            acquired = self._slots.acquire(timeout=max(0.0, wait_seconds))
        finally:
            with self._lock:
                self._waiting -= 1
        if not acquired:
            with self._lock:
                self._refused += 1
            raise ClusterBusy(f"cluster {self.name} is busy: no snapshot slot freed within {wait_seconds:.0f} s "
                              f"({self.limit} at once); try again in a minute")
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
            self._slots.release()
