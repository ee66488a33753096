"""Test doubles at the bot's own seams: a notifier that records, a directory and a revalidator over dicts."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from bot.schedule.store import Button
from bot.schedule.tasks import IncidentThread, Revalidation


@dataclasses.dataclass
class Posted:
    where: str
    text: str
    buttons: tuple[Button, ...] = ()


class RecordingNotifier:
    """Keeps every post; the real one (handlers) talks to Slack."""

    def __init__(self) -> None:
        self.posts: list[Posted] = []
        self.files: list[tuple[str, str, bytes]] = []

    def post_thread(
        self, *, channel: str, thread_ts: str, text: str, buttons: tuple[Button, ...] = ()
    ) -> None:
        self.posts.append(Posted(where=f"{channel}/{thread_ts}", text=text, buttons=buttons))

    def post_direct(self, *, user: str, text: str) -> None:
        self.posts.append(Posted(where=f"dm:{user}", text=text))

    def post_channel(self, *, channel: str, text: str) -> None:
        self.posts.append(Posted(where=channel, text=text))

    def upload_file(
        self, *, channel: str, thread_ts: str, filename: str, content: bytes, title: str, comment: str = ""
    ) -> None:
        self.files.append((f"{channel}/{thread_ts}", filename, content))


class DictDirectory:
    def __init__(self, *threads: IncidentThread) -> None:
        self.threads = {thread.key: thread for thread in threads}

    def thread(self, *, incident_key: str) -> IncidentThread | None:
        return self.threads.get(incident_key)


class ScriptedRevalidator:
    """Answers with the rules the test says the fresh snapshot finds."""

    def __init__(self, *, original: set[str], clock) -> None:
        self.original = frozenset(original)
        self.current: frozenset[str] = frozenset(original)
        self.clock = clock
        self.calls = 0
        self.requested_by: list[str] = []

    def revalidate(self, *, incident_key: str, requested_by: str) -> Revalidation:
        self.calls += 1
        self.requested_by.append(requested_by)
        taken: datetime = self.clock()
        return Revalidation(original_rules=self.original, current_rules=self.current, taken_at=taken)
