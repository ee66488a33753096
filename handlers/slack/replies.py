"""Everything the bot posts goes through here: one place where text and blocks become Slack messages.

Commands, buttons, modals and scheduled tasks all post with `post_message` (thread replies, top-level
messages and DMs), `post_ephemeral` and `upload_file`; the records (handoff, postmortem), findings, a
change's new state and an assignment's DM are built on them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.changes import charts
from bot.changes.service import ChangeOutcome, ChangeState, ChangeView
from bot.core import Core
from bot.evidence.report import SnapshotReport
from bot.incidents.policy import BOT_ACTOR, parse_role, role_expectations
from bot.incidents.service import IncidentView
from bot.records import build as records
from bot.records import bundle
from bot.schedule.tasks import TaskKind, schedule_validation_windows, validation_prefix
from handlers.slack.blocks import changes as change_blocks
from handlers.slack.blocks import common as blocks
from handlers.slack.blocks import findings as findings_blocks
from handlers.slack.blocks import limits

log = logging.getLogger(__name__)

HANDOFF_ROLES = frozenset({"owner", "commander"})
MAX_MESSAGE_TEXT = 3900


def post_message(
    client: WebClient,
    *,
    channel: str,
    text: str,
    thread_ts: str | None = None,
    blocks_: Sequence[dict[str, Any]] | None = None,
) -> str:
    """A message in a channel, a thread (`thread_ts`) or a DM (`channel` = a user id); returns its ts."""
    kwargs: dict[str, Any] = {"channel": channel, "text": blocks.clip(text, limit=MAX_MESSAGE_TEXT)}
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    if blocks_:
        kwargs["blocks"] = limits.checked(blocks_)
    return str(client.chat_postMessage(**kwargs)["ts"])


def post(
    client: WebClient, incident: IncidentView, *, text: str, blocks_: Sequence[dict[str, Any]] | None = None
) -> str:
    """A reply in the incident's thread (or its channel, before a root message exists)."""
    return post_message(client, channel=incident.channel_id, thread_ts=incident.thread_ts, text=text, blocks_=blocks_)


def post_ephemeral(
    client: WebClient, *, channel: str, user: str, text: str, blocks_: Sequence[dict[str, Any]] | None = None
) -> None:
    """A message only `user` sees."""
    kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": blocks.clip(text, limit=MAX_MESSAGE_TEXT)}
    if blocks_:
        kwargs["blocks"] = limits.checked(blocks_)
    client.chat_postEphemeral(**kwargs)


def ephemeral(client: WebClient, *, channel: str, user: str, text: str) -> None:
    """An ephemeral reply that never raises: a failure to tell someone is logged, not escalated."""
    try:
        post_ephemeral(client, channel=channel, user=user, text=text)
    except SlackApiError as error:
        log.warning("could not send an ephemeral reply: %s", error.response.get("error"))


def upload_file(
    client: WebClient,
    *,
    channel: str,
    thread_ts: str | None,
    filename: str,
    content: bytes,
    title: str,
    comment: str = "",
) -> None:
    """A file (Markdown, PNG) in the thread."""
    kwargs: dict[str, Any] = {"channel": channel, "filename": filename, "content": content, "title": title}
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    if comment:
        kwargs["initial_comment"] = blocks.clip(comment, limit=MAX_MESSAGE_TEXT)
    client.files_upload_v2(**kwargs)


def refresh_root(client: WebClient, incident: IncidentView, *, report: SnapshotReport | None = None) -> None:
    """Re-render the root message after a state change (with the verdict, right after a snapshot)."""
    if not incident.thread_ts:
        return
    client.chat_update(
        channel=incident.channel_id,
        ts=incident.thread_ts,
        text=blocks.incident_root_text(incident=incident),
        blocks=limits.checked(blocks.incident_root(incident=incident, report=report)),
    )


def post_findings(client: WebClient, *, incident: IncidentView, report: SnapshotReport) -> str:
    """Findings grouped by layer, verdict first; the full Markdown is attached whenever the message shortened."""
    rendered = findings_blocks.render_findings(snapshot=report, incident_key=incident.key)
    ts = post_message(
        client,
        channel=incident.channel_id,
        thread_ts=incident.thread_ts,
        text=rendered.text_fallback,
        blocks_=rendered.blocks,
    )
    if rendered.attachment is not None:
        upload_file(
            client,
            channel=incident.channel_id,
            thread_ts=incident.thread_ts,
            filename=f"{incident.key}-findings.md",
            content=rendered.attachment.encode(),
            title=f"{incident.key} findings (full evidence)",
        )
    return ts


def post_handoff(*, core: Core, client: WebClient, incident_key: str, reason: str) -> str:
    """The handoff as a thread reply and a Markdown file; returns the Markdown."""
    incident = core.incidents.get(incident_key=incident_key)
    record = records.build_handoff(data=core.incident_data(incident_key=incident_key), now=core.clock())
    markdown = records.render_handoff(record=record)
    post(client, incident, text=f":page_facing_up: Handoff for {incident.key} ({reason})\n{markdown}")
    upload_file(
        client,
        channel=incident.channel_id,
        thread_ts=incident.thread_ts,
        filename=f"{incident.key}-handoff.md",
        content=markdown.encode(),
        title=f"{incident.key} handoff",
    )
    core.incidents.add_timeline_entry(
        incident_key=incident.key, actor=BOT_ACTOR, kind="handoff", text=f"Handoff posted ({reason})"
    )
    return markdown


def post_postmortem(*, core: Core, client: WebClient, incident_key: str) -> str:
    """The postmortem as a Markdown file in the thread, with each change's chart beside it."""
    incident = core.incidents.get(incident_key=incident_key)
    data = core.incident_data(incident_key=incident_key)
    markdown = records.render_postmortem(record=records.build_postmortem(data=data, now=core.clock()))
    upload_file(
        client,
        channel=incident.channel_id,
        thread_ts=incident.thread_ts,
        filename=f"{incident.key}-postmortem.md",
        content=markdown.encode(),
        title=f"{incident.key} postmortem",
        comment=f":memo: Postmortem for {incident.key}. Fill any _not recorded_ section with "
        "`/triage note summary: ...`, `impact:`, `root cause:`, `remediation:` and run `/triage postmortem` again.",
    )
    for path, png in bundle.chart_files(data=data).items():
        upload_file(
            client,
            channel=incident.channel_id,
            thread_ts=incident.thread_ts,
            filename=path.rsplit("/", 1)[-1],
            content=png,
            title=path,
        )
    core.incidents.add_timeline_entry(
        incident_key=incident.key, actor=BOT_ACTOR, kind="postmortem", text="Postmortem written"
    )
    return markdown


def assign(
    *, core: Core, client: WebClient, incident: IncidentView, user_id: str, role: str, actor: str
) -> IncidentView:
    """Assign (the core checks who may), announce in the thread, DM the assignee what is expected, and
    hand off when the owner or commander moved."""
    updated = core.incidents.assign(incident_key=incident.key, user_id=user_id, role=role, actor=actor)
    role = parse_role(text=role)
    post(client, updated, text=f"<@{actor}> made <@{user_id}> *{role}* of {updated.key}.")
    post_message(
        client, channel=user_id, text=role_expectations(role=role, incident_key=updated.key, target=updated.target)
    )
    if role in HANDOFF_ROLES:
        post_handoff(core=core, client=client, incident_key=updated.key, reason=f"{role} is now <@{user_id}>")
    refresh_root(client, updated)
    return updated


def after_change_state(*, core: Core, client: WebClient, user: str, outcome: ChangeOutcome) -> None:
    """Announce a change's new state; applied queues validation windows (run as `user`), rolled back
    cancels them."""
    change = outcome.change
    incident = core.incidents.get(incident_key=change.incident_key)
    verb = change.state.value.replace("_", " ")
    note = ""
    if change.state is ChangeState.APPLIED and change.applied_at is not None:
        queued = schedule_validation_windows(
            store=core.tasks, change=change, applied_at=change.applied_at, requested_by=user
        )
        note = f" Re-validation snapshots scheduled ({len(queued)} windows: +15m, +60m)."
    if change.state is ChangeState.VALIDATED:
        reproduced = [
            str(task.result.get("window"))
            for task in core.tasks.tasks(incident_key=change.incident_key, kind=TaskKind.VALIDATION_WINDOW)
            if task.result and task.result.get("change_id") == change.id and task.result.get("reproduces")
        ]
        if reproduced:
            note += (
                f" Careful: the original failure still reproduced in window(s) {', '.join(reproduced)}; "
                "the metric improved, the incident may not be fixed."
            )
    headline = f"<@{user}> marked change #{change.id} *{verb}*.{note}"
    post(
        client,
        incident,
        text=headline,
        blocks_=change_blocks.change_blocks(change=change, warning=outcome.warning, headline=headline),
    )
    if change.state is ChangeState.VALIDATED:
        upload_chart(client, incident, change)
    if change.state is ChangeState.ROLLED_BACK:
        core.tasks.cancel(
            kind=TaskKind.VALIDATION_WINDOW,
            incident_key=change.incident_key,
            dedupe_prefix=validation_prefix(change_id=change.id),
        )


def upload_chart(client: WebClient, incident: IncidentView, change: ChangeView) -> None:
    """A change's chart once it has at least two windows."""
    windows = len({item.window for item in change.measurements})
    if windows < 2:
        return
    upload_file(
        client,
        channel=incident.channel_id,
        thread_ts=incident.thread_ts,
        filename=f"{incident.key}-change-{change.id}.png",
        content=charts.change_chart_png(change=change),
        title=f"Change #{change.id}: {change.metric} per window",
        comment=f"Change #{change.id}: gain {'repeated' if change.gain_repeated else 'did NOT repeat'} "
        f"across {windows} windows.",
    )
