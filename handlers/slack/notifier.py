"""Scheduled tasks post through this: the core's Notifier over Slack, by way of the one posting module."""

from __future__ import annotations

from slack_sdk import WebClient

from bot.schedule.store import Button
from handlers.slack import replies
from handlers.slack.blocks import common as blocks


class SlackNotifier:
    """The bot's Notifier over Slack's Web API."""

    def __init__(self, *, client: WebClient) -> None:
        """Token and base URL live on the client."""
        self._client = client

    def post_thread(
        self, *, channel: str, thread_ts: str, text: str, buttons: tuple[Button, ...] = ()
    ) -> None:
        """A thread reply, with buttons rendered as Block Kit."""
        blocks_ = None
        if buttons:
            blocks_ = [
                blocks.section(blocks.clip(text, limit=2900)),
                {
                    "type": "actions",
                    "elements": [
                        blocks.button(text=item.label, action_id=item.action_id, value=item.value)
                        for item in buttons
                    ],
                },
            ]
        replies.post_message(self._client, channel=channel, thread_ts=thread_ts, text=text, blocks_=blocks_)

    def post_direct(self, *, user: str, text: str) -> None:
        """A DM: posting to a user id lands in the app's conversation with them."""
        replies.post_message(self._client, channel=user, text=text)

    def post_channel(self, *, channel: str, text: str) -> None:
        """A top-level channel message."""
        replies.post_message(self._client, channel=channel, text=text)

    def upload_file(
        self, *, channel: str, thread_ts: str, filename: str, content: bytes, title: str, comment: str = ""
    ) -> None:
        """files.uploadV2 into the thread."""
        replies.upload_file(
            self._client,
            channel=channel,
            thread_ts=thread_ts,
            filename=filename,
            content=content,
            title=title,
            comment=comment,
        )
