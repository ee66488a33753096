"""The bounded snapshot engine: run collector steps in stages under one deadline, and always return.

It knows nothing of Kubernetes: collectors hand it `Step`s; it runs each stage's steps on a bounded thread
pool, stops waiting at the global deadline, and reports per collector what it did (ok, partial, timeout,
error, forbidden, skipped) with elapsed time, items and truncation.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bot.config import SnapshotBounds
from bot.evidence.findings import CollectorOutcome, CollectorReport, Observation


class DeadlineExceeded(Exception):
    """The snapshot's global deadline has passed; stop making calls."""


class CollectorFailure(Exception):
    """A collector stopped for a reason the report should name (403, missing API group, server error)."""

    def __init__(self, *, outcome: CollectorOutcome, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


class Budget:
    """One snapshot's bounds as a live account: time left, per-call timeout, evidence bytes left."""

    def __init__(self, *, bounds: SnapshotBounds, clock: Callable[[], float] = time.monotonic) -> None:
        self.bounds = bounds
        self._clock = clock
        self.started = clock()
        self.deadline = self.started + bounds.deadline_seconds
        self._evidence_bytes = 0
        self._lock = threading.Lock()

    def remaining(self) -> float:
        """Seconds left before the global deadline (never negative)."""
        return max(0.0, self.deadline - self._clock())

    def elapsed_ms(self) -> int:
        """Milliseconds since the snapshot started."""
        return int((self._clock() - self.started) * 1000)

    def call_timeout(self) -> float:
        """The timeout for the next API call: the per-call cap, but never past the deadline."""
        left = self.remaining()
        if left <= 0.01:
            raise DeadlineExceeded("snapshot deadline reached")
        return min(self.bounds.call_timeout_seconds, left)

    def take_evidence_bytes(self, wanted: int) -> int:
        """Reserve up to `wanted` bytes of the total evidence allowance; returns what was granted."""
        with self._lock:
            granted = max(0, min(wanted, self.bounds.max_total_evidence_bytes - self._evidence_bytes))
            self._evidence_bytes += granted
            return granted

    def refund_evidence_bytes(self, unused: int) -> None:
        """Give back part of a reservation that was not used (a log shorter than its cap)."""
        with self._lock:
            self._evidence_bytes = max(0, self._evidence_bytes - max(0, unused))

    @property
    def evidence_bytes(self) -> int:
        """Evidence bytes kept so far."""
        with self._lock:
            return self._evidence_bytes


class Sink:
    """Where one step puts what it saw; survives the step failing or timing out halfway."""

    def __init__(self, *, budget: Budget) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._closed = False
        self.observations: list[Observation] = []
        self.items = 0
        self.truncated = False
        self.notes: list[str] = []
        self.outcome: CollectorOutcome | None = None

    def observe(self, observation: Observation) -> bool:
        """Keep one observation if the evidence allowance has room; False (and truncated) when it has not."""
        size = len(observation.text) + len(json.dumps(observation.fields, default=str))
        granted = self._budget.take_evidence_bytes(size)
        with self._lock:
            if self._closed:
                return False
            if granted < size:
                self.truncated = True
                self.notes.append("total evidence bytes cap reached")
                return False
            self.observations.append(observation)
            return True

    def count(self, items: int) -> None:
        """Count API items read."""
        with self._lock:
            self.items += items

    def truncate(self, note: str) -> None:
        """Mark the result as cut short by a bound, and say which."""
        with self._lock:
            self.truncated = True
            if note not in self.notes:
                self.notes.append(note)

    def note(self, text: str) -> None:
        """Say something about the result without changing its outcome."""
        with self._lock:
            if text not in self.notes:
                self.notes.append(text)

    def mark(self, outcome: CollectorOutcome, note: str) -> None:
        """Set the step's outcome explicitly (e.g. skipped: not an AIPerfJob; forbidden on one sub-call)."""
        with self._lock:
            self.outcome = outcome
            if note and note not in self.notes:
                self.notes.append(note)

    def close(self) -> list[Observation]:
        """Freeze: a step still running after the deadline can add nothing more."""
        with self._lock:
            self._closed = True
            return list(self.observations)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    """One unit of collection; steps sharing a `collector` name are reported together."""

    collector: str
    run: Callable[[Sink], None]


Stage = Callable[[], Sequence[Step]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SnapshotResult:
    """What the engine gathered and how each collector fared."""

    observations: tuple[Observation, ...]
    reports: tuple[CollectorReport, ...]
    elapsed_ms: int

    @property
    def not_checked(self) -> tuple[str, ...]:
        """Human lines for every collector that did not finish cleanly."""
        return tuple(
            f"{report.name}: {report.outcome.value}" + (f" ({report.detail})" if report.detail else "")
            for report in self.reports
            if report.outcome is not CollectorOutcome.OK or report.truncated
        )


# Worst first: a merged collector report takes the worst outcome of its steps.
_SEVERITY = (CollectorOutcome.ERROR, CollectorOutcome.TIMEOUT, CollectorOutcome.FORBIDDEN,
             CollectorOutcome.PARTIAL, CollectorOutcome.OK, CollectorOutcome.SKIPPED)


@dataclasses.dataclass(kw_only=True)
class _Tally:
    name: str
    outcome: CollectorOutcome = CollectorOutcome.SKIPPED
    seen: bool = False
    elapsed_ms: int = 0
    items: int = 0
    truncated: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)

    def add(self, *, outcome: CollectorOutcome, elapsed_ms: int, sink: Sink | None, note: str = "") -> None:
        if not self.seen:
            self.outcome = outcome
        elif _SEVERITY.index(outcome) < _SEVERITY.index(self.outcome):
            mixed = self.outcome in (CollectorOutcome.OK, CollectorOutcome.PARTIAL)
            self.outcome = CollectorOutcome.PARTIAL if mixed and outcome is CollectorOutcome.SKIPPED else outcome
        self.seen = True
        self.elapsed_ms = max(self.elapsed_ms, elapsed_ms)
        if sink is not None:
            self.items += sink.items
            self.truncated = self.truncated or sink.truncated
            self.notes.extend(note for note in sink.notes if note not in self.notes)
        if note and note not in self.notes:
            self.notes.append(note)

    def report(self) -> CollectorReport:
        outcome = self.outcome
        if outcome is CollectorOutcome.OK and self.truncated:
            outcome = CollectorOutcome.PARTIAL
        return CollectorReport(name=self.name, outcome=outcome, elapsed_ms=self.elapsed_ms, items=self.items,
                               truncated=self.truncated, detail="; ".join(self.notes)[:500])


def _run_step(step: Step, sink: Sink) -> tuple[CollectorOutcome, str]:
    try:
        step.run(sink)
    except DeadlineExceeded as exc:
        return CollectorOutcome.TIMEOUT, str(exc)
    except CollectorFailure as exc:
        return exc.outcome, exc.detail
    except Exception as exc:  # noqa: BLE001 - a snapshot always returns; the report names the failure
        return CollectorOutcome.ERROR, f"{type(exc).__name__}: {exc}"[:300]
    if sink.outcome is not None:
        return sink.outcome, ""
    return (CollectorOutcome.PARTIAL if sink.truncated else CollectorOutcome.OK), ""


class _DaemonPool:
    """A bounded pool of daemon threads. A step still blocked on a server when the deadline passes is
    abandoned without holding the process open: ThreadPoolExecutor's threads are joined at interpreter exit,
    so one stuck read kept `triage-bot triage job` alive long past its deadline."""

    def __init__(self, *, workers: int, prefix: str) -> None:
        self._work: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, name=f"{prefix}_{index}", daemon=True)
                         for index in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._work.put((future, fn, args))
        return future

    def shutdown(self, *, wait: bool = False, cancel_futures: bool = True) -> None:
        """Idle workers leave at once; busy ones finish their step (or are abandoned with the process)."""
        del wait, cancel_futures  # never waits; queued steps are cancelled by the caller's futures
        for _ in self._threads:
            self._work.put(None)

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)


def run_snapshot(*, stages: Sequence[Stage], budget: Budget) -> SnapshotResult:
    """Run stages in order, each stage's steps concurrently, never past the budget's deadline."""
    tallies: dict[str, _Tally] = {}
    observations: list[Observation] = []
    executor = _DaemonPool(workers=budget.bounds.max_concurrency, prefix="snapshot")
    try:
        for stage in stages:
            if budget.remaining() <= 0.01:
                break
            try:
                steps = list(stage())
            except Exception as exc:  # noqa: BLE001 - planning a stage must not sink the snapshot
                tallies.setdefault("planner", _Tally(name="planner")).add(
                    outcome=CollectorOutcome.ERROR, elapsed_ms=budget.elapsed_ms(), sink=None,
                    note=f"{type(exc).__name__}: {exc}"[:300])
                break
            _run_stage(steps=steps, budget=budget, executor=executor, tallies=tallies, observations=observations)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
    return SnapshotResult(observations=tuple(observations),
                          reports=tuple(tally.report() for tally in tallies.values()),
                          elapsed_ms=budget.elapsed_ms())


def _run_stage(*, steps: list[Step], budget: Budget, executor: _DaemonPool,
               tallies: dict[str, _Tally], observations: list[Observation]) -> None:
    started = time.monotonic()
    running: dict[concurrent.futures.Future[tuple[CollectorOutcome, str]], tuple[Step, Sink]] = {}
    for step in steps:
        sink = Sink(budget=budget)
        running[executor.submit(_run_step, step, sink)] = (step, sink)
    done, _ = concurrent.futures.wait(running, timeout=budget.remaining())
    for future, (step, sink) in running.items():
        tally = tallies.setdefault(step.collector, _Tally(name=step.collector))
        kept = sink.close()
        elapsed_ms = int((time.monotonic() - started) * 1000)
        if future in done:
            outcome, note = future.result()
        else:
            future.cancel()
            outcome, note = CollectorOutcome.TIMEOUT, "snapshot deadline reached while this was running"
        if outcome is CollectorOutcome.TIMEOUT and kept:
            note = note + f"; kept {len(kept)} observations gathered before the deadline"
        tally.add(outcome=outcome, elapsed_ms=elapsed_ms, sink=sink, note=note)
        observations.extend(kept)
