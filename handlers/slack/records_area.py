"""The records area's services and its Slack notifier, built once per app from the foundation's Services."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from slack_sdk import WebClient

from bot.changes.prevention import PreventionService
from bot.changes.service import ChangeService
from bot.evidence import findings
from bot.records import build as records
from bot.records.sources import ServiceDirectory, SnapshotRevalidator, load_incident_data, timeline_sink
from bot.schedule.store import Button, JobRunner, JobScheduler, JobStore, default_instance_id
from bot.schedule.tasks import build_handlers
from handlers.slack.blocks import common as blocks

log = logging.getLogger(__name__)


class SlackNotifier:
    """The bot's Notifier over Slack's Web API."""

    def __init__(self, *, client: WebClient) -> None:
        """Token and base URL live on the client."""
        self._client = client

    def post_thread(
        self, *, channel: str, thread_ts: str, text: str, buttons: tuple[Button, ...] = ()
    ) -> None:
        """A thread reply, with buttons rendered as Block Kit."""
        kwargs: dict[str, Any] = {"channel": channel, "text": blocks.clip(text, limit=3900)}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        if buttons:
            kwargs["blocks"] = blocks.validate_blocks(
                [
                    blocks.section(blocks.clip(text, limit=2900)),
                    {
                        "type": "actions",
                        "elements": [
                            blocks.button(text=item.label, action_id=item.action_id, value=item.value)
                            for item in buttons
                        ],
                    },
                ]
            )
        self._client.chat_postMessage(**kwargs)

    def post_direct(self, *, user: str, text: str) -> None:
        """A DM: posting to a user id lands in the app's conversation with them."""
        self._client.chat_postMessage(channel=user, text=blocks.clip(text, limit=3900))

    def post_channel(self, *, channel: str, text: str) -> None:
        """A top-level channel message."""
        self._client.chat_postMessage(channel=channel, text=blocks.clip(text, limit=3900))

    def upload_file(
        self, *, channel: str, thread_ts: str, filename: str, content: bytes, title: str, comment: str = ""
    ) -> None:
        """files.uploadV2 into the thread."""
        kwargs: dict[str, Any] = {
            "channel": channel,
            "filename": filename,
            "content": content,
            "title": title,
        }
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        if comment:
            kwargs["initial_comment"] = blocks.clip(comment, limit=3900)
        self._client.files_upload_v2(**kwargs)


@dataclasses.dataclass(kw_only=True)
class RecordsArea:
    """Changes, prevention, durable jobs and the scheduler that runs them, for one app."""

    changes: ChangeService
    prevention: PreventionService
    jobs: JobStore
    runner: JobRunner
    scheduler: JobScheduler
    notifier: SlackNotifier
    clock: Callable[[], datetime]

    def incident_data(self, *, incidents: Any, incident_key: str) -> records.IncidentData:
        """Everything the records need about one incident."""
        return load_incident_data(
            engine=incidents.engine,
            incident_key=incident_key,
            changes=self.changes,
            prevention=self.prevention,
            jobs=self.jobs,
        )


def build_area(
    *, services: Any, client: WebClient, clock: Callable[[], datetime] = findings.utcnow
) -> RecordsArea:
    """Wire the records services over the incident service's engine."""
    engine = services.incidents.engine
    sink = timeline_sink(clock=clock)
    changes = ChangeService(engine=engine, clock=clock, on_event=sink)
    prevention = PreventionService(engine=engine, clock=clock, on_event=sink)
    jobs = JobStore(engine=engine, clock=clock)
    notifier = SlackNotifier(client=client)
    handlers = build_handlers(
        notifier=notifier,
        directory=ServiceDirectory(incidents=services.incidents),
        revalidator=SnapshotRevalidator(incidents=services.incidents, settings=services.settings),
        prevention=prevention,
        change_lookup=lambda change_id: changes.get(change_id=change_id),
        prune_requests=services.incidents.prune_processed_requests,
    )
    metrics = getattr(services, "metrics", None)
    runner = JobRunner(
        store=jobs,
        handlers=handlers,
        instance_id=services.settings.instance_id or default_instance_id(),
        on_run=None if metrics is None else metrics.count_job,
    )
    scheduler = JobScheduler(runner=runner, poll_seconds=services.settings.scheduler_poll_seconds)
    return RecordsArea(
        changes=changes,
        prevention=prevention,
        jobs=jobs,
        runner=runner,
        scheduler=scheduler,
        notifier=notifier,
        clock=clock,
    )
