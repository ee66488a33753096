"""Fault injection for the hardening tests: a Slack stand-in that can fail, stall or time out, and
helpers to run more than one replica of the real bot against one database."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bot.evidence.report import Diagnoser
from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import RecordedCall, SlackApiStandIn
from tests.support.slack import BotUnderTest, lab_settings, make_bot, serving


@dataclasses.dataclass(kw_only=True)
class Fault:
    """Calls `first`..`first + times - 1` of `method` (counted from when it was scripted) misbehave."""

    method: str
    first: int
    times: int
    status: int | None = None
    error: str = "internal_error"
    delay: float = 0.0
    retry_after: int | None = None


class FaultySlackApi(SlackApiStandIn):
    """The foundation's stand-in plus HTTP 5xx, stalls (for client timeouts) and Nth-call faults."""

    def __init__(self) -> None:
        super().__init__()
        self._faults: list[Fault] = []
        self._seen: Counter[str] = Counter()
        self._fault_lock = threading.Lock()

    def inject(
        self,
        method: str,
        *,
        on_call: int = 1,
        times: int = 1,
        status: int | None = None,
        error: str = "internal_error",
        delay: float = 0.0,
        retry_after: int | None = None,
    ) -> None:
        """Script a fault: `status` answers with that HTTP status, `delay` stalls before answering."""
        with self._fault_lock:
            first = self._seen[method] + on_call
            self._faults.append(
                Fault(
                    method=method,
                    first=first,
                    times=times,
                    status=status,
                    error=error,
                    delay=delay,
                    retry_after=retry_after,
                )
            )

    def heal(self) -> None:
        """Forget every scripted fault: Slack is back."""
        with self._fault_lock:
            self._faults.clear()

    def answer(
        self, *, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._fault_lock:
            self._seen[method] += 1
            number = self._seen[method]
            fault = next(
                (
                    item
                    for item in self._faults
                    if item.method == method and item.first <= number < item.first + item.times
                ),
                None,
            )
        if fault is None:
            return super().answer(method=method, params=params, token=token)
        if fault.delay:
            time.sleep(fault.delay)
        if fault.status is None:
            return super().answer(method=method, params=params, token=token)
        self._record(RecordedCall(method=method, params=params, token=token, at=time.time()))
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        return fault.status, {"ok": False, "error": fault.error}, headers


@pytest.fixture
def slack_stand_in() -> Iterator[FaultySlackApi]:
    """Overrides the foundation's fixture for this directory: same stand-in, plus fault injection."""
    with FaultySlackApi() as stand_in:
        yield stand_in


@contextmanager
def running_bot(
    *,
    database_url: str,
    slack: SlackApiStandIn,
    diagnoser: Diagnoser | None = minimal_diagnoser,
    client_timeout: float | None = None,
    **settings: Any,
) -> Iterator[BotUnderTest]:
    """One replica: its own services, Bolt app and waitress server, on a shared database and Slack."""
    built = make_bot(
        database_url=database_url,
        slack=slack,
        diagnoser=diagnoser,
        settings=lab_settings(database_url=database_url, slack=slack, **settings),
    )
    if client_timeout is not None:
        built.client.timeout = int(client_timeout) or 1
    with serving(built, slack=slack) as running:
        yield running


def root_messages(slack: SlackApiStandIn) -> list[RecordedCall]:
    """Top-level chat.postMessage calls that succeeded in reaching the stand-in (one per incident)."""
    return [call for call in slack.calls_to("chat.postMessage") if "thread_ts" not in call.params]
