"""What every Slack listener gets: the core, plus what the edge keeps (metrics, the work in flight)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from bot.config import Settings
from bot.core import Core
from bot.diagnosis.reach import ReachabilityCache
from bot.evidence.report import Diagnoser
from bot.incidents.service import IncidentService
from bot.schedule.store import TaskScheduler
from handlers.ops.metrics import BotMetrics
from handlers.ops.work import WorkTracker

if TYPE_CHECKING:
    from handlers.slack.router import Subcommand


@dataclasses.dataclass(kw_only=True)
class Services:
    """Built once per app by `handlers.slack.app.build_slack_bot`; listeners read, never rebuild."""

    core: Core
    subcommands: dict[str, Subcommand]
    metrics: BotMetrics = dataclasses.field(default_factory=BotMetrics)
    work: WorkTracker = dataclasses.field(default_factory=WorkTracker)
    diagnoser_label: str = ""
    reachability: ReachabilityCache | None = None  # each cluster's last answer, for /readyz and /metrics

    @property
    def settings(self) -> Settings:
        """The one settings object."""
        return self.core.settings

    @property
    def incidents(self) -> IncidentService:
        """The incident lifecycle."""
        return self.core.incidents

    @property
    def diagnoser(self) -> Diagnoser | None:
        """The snapshot taker, None when no cluster is configured."""
        return self.core.incidents.diagnoser

    @property
    def scheduler(self) -> TaskScheduler:
        """Durable scheduled tasks."""
        return self.core.scheduler
