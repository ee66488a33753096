"""What the Slack app needs, bundled: settings, the incident service, the diagnoser, hooks for other areas."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot.config import Settings
from bot.evidence.report import Diagnoser
from bot.incidents.service import IncidentService
from handlers.ops.metrics import BotMetrics

if TYPE_CHECKING:
    from slack_bolt import App

    from handlers.slack.router import Subcommand


class WorkTracker:
    """Counts slow work still running after an ack, so tests and the demo can wait for it."""

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


Registration = Callable[["App", "Services"], None]


@dataclasses.dataclass(kw_only=True)
class Services:
    """Passed to every listener. Other areas add subcommands to `subcommands` and listeners via
    `extra_registrations` (each called as `register(app, services)` while the app is built)."""

    settings: Settings
    incidents: IncidentService
    diagnoser: Diagnoser | None = None
    diagnoser_label: str = ""
    metrics: BotMetrics = dataclasses.field(default_factory=BotMetrics)
    work: WorkTracker = dataclasses.field(default_factory=WorkTracker)
    subcommands: dict[str, Subcommand] = dataclasses.field(default_factory=dict)
    extra_registrations: list[Registration] = dataclasses.field(default_factory=list)
    scheduler: Any | None = None
