"""Everything the bot posts goes through here: one place where text and blocks become Slack messages.

Commands, buttons, modals and scheduled tasks all post with `post_message` (thread replies, top-level
messages and DMs), `post_root`, `update_message`, `post_ephemeral` and `upload_file`; the records
(handoff, postmortem), findings, a change's new state and an assignment's DM are built on them.

Every text and every mrkdwn block passes `bot.markup.render` here: text the bot composed (`Mrkdwn`)
keeps its own mentions and loses any other `<...>`; any other text, whatever produced it, is data and
is escaped entirely. Uploaded text files keep their Markdown but no `<!channel>`-style special.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import markup
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
TEXT_FILE_SUFFIXES = (".md", ".txt", ".json", ".csv", ".log")
_TEXT_LIMITS = {"context": limits.MAX_CONTEXT_TEXT}


def slack_text(text: str, *, limit: int = MAX_MESSAGE_TEXT) -> str:
    """The text Slack receives: rendered by the markup rules (data escaped), then clipped."""
    return str(markup.clip(markup.Mrkdwn(markup.render(text)), limit=limit))


def slack_blocks(blocks_: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Blocks Slack receives: every mrkdwn text rendered, then checked against Slack's limits."""
    return limits.checked(markup.render_blocks(blocks_, limits=_TEXT_LIMITS))


def post_message(
    client: WebClient,
    *,
    channel: str,
    text: str,
    thread_ts: str | None = None,
    blocks_: Sequence[dict[str, Any]] | None = None,
) -> str:
    """A message in a channel, a thread (`thread_ts`) or a DM (`channel` = a user id); returns its ts."""
    return post_root(client, channel=channel, text=text, thread_ts=thread_ts, blocks_=blocks_)[1]


def post_root(
    client: WebClient,
    *,
    channel: str,
    text: str,
    thread_ts: str | None = None,
    blocks_: Sequence[dict[str, Any]] | None = None,
) -> tuple[str, str]:
    """Like `post_message`, returning (channel id, ts) as Slack resolved them (an incident's root)."""
    kwargs: dict[str, Any] = {"channel": channel, "text": slack_text(text)}
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    if blocks_:
        kwargs["blocks"] = slack_blocks(blocks_)
    response = client.chat_postMessage(**kwargs)
    return str(response.get("channel") or channel), str(response["ts"])


def update_message(
    client: WebClient, *, channel: str, ts: str, text: str, blocks_: Sequence[dict[str, Any]] | None = None
) -> None:
    """Replace a message the bot posted (the root after a state change, a change after a click)."""
    kwargs: dict[str, Any] = {"channel": channel, "ts": ts, "text": slack_text(text)}
    if blocks_ is not None:
        kwargs["blocks"] = slack_blocks(blocks_)
    client.chat_update(**kwargs)


def post(
    client: WebClient, incident: IncidentView, *, text: str, blocks_: Sequence[dict[str, Any]] | None = None
) -> str:
    """A reply in the incident's thread (or its channel, before a root message exists)."""
    return post_message(client, channel=incident.channel_id, thread_ts=incident.thread_ts, text=text, blocks_=blocks_)


def post_ephemeral(
    client: WebClient, *, channel: str, user: str, text: str, blocks_: Sequence[dict[str, Any]] | None = None
) -> None:
    """A message only `user` sees."""
    kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": slack_text(text)}
    if blocks_:
        kwargs["blocks"] = slack_blocks(blocks_)
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
    """A file (Markdown, PNG) in the thread; a text file carries no live broadcast."""
    if filename.lower().endswith(TEXT_FILE_SUFFIXES):
        content = markup.inert_file_text(content)
    kwargs: dict[str, Any] = {
        "channel": channel,
        "filename": filename,
        "content": content,
        "title": markup.clip(title, limit=250),
    }
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    if comment:
        kwargs["initial_comment"] = slack_text(comment)
    client.files_upload_v2(**kwargs)


def refresh_root(client: WebClient, incident: IncidentView, *, report: SnapshotReport | None = None) -> None:
    """Re-render the root message after a state change (with the verdict, right after a snapshot)."""
    if not incident.thread_ts:
        return
    update_message(
        client,
        channel=incident.channel_id,
        ts=incident.thread_ts,
        text=blocks.incident_root_text(incident=incident),
        blocks_=blocks.incident_root(incident=incident, report=report),
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
    """The handoff as a thread reply (every value in it escaped) and a Markdown file; returns the Markdown.
    `reason` is data unless composed as Mrkdwn."""
    incident = core.incidents.get(incident_key=incident_key)
    record = records.build_handoff(data=core.incident_data(incident_key=incident_key), now=core.clock())
    markdown = records.render_handoff(record=record)
    post(
        client,
        incident,
        text=markup.format(
            ":page_facing_up: Handoff for {} ({})\n{}", incident.key, reason, records.render_handoff_mrkdwn(record=record)
        ),
    )
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
        comment=markup.format(
            ":memo: Postmortem for {}. Fill any _not recorded_ section with `/triage note summary: ...`, "
            "`impact:`, `root cause:`, `remediation:` and run `/triage postmortem` again.",
            incident.key,
        ),
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
    post(
        client,
        updated,
        text=markup.format("{} made {} *{}* of {}.", markup.mention(actor), markup.mention(user_id), role, updated.key),
    )
    post_message(
        client, channel=user_id, text=role_expectations(role=role, incident_key=updated.key, target=updated.target)
    )
    if role in HANDOFF_ROLES:
        post_handoff(
            core=core,
            client=client,
            incident_key=updated.key,
            reason=markup.format("{} is now {}", role, markup.mention(user_id)),
        )
    refresh_root(client, updated)
    return updated


def after_change_state(*, core: Core, client: WebClient, user: str, outcome: ChangeOutcome) -> None:
    """Announce a change's new state; applied queues validation windows (run as `user`), rolled back
    cancels them."""
    change = outcome.change
    incident = core.incidents.get(incident_key=change.incident_key)
    verb = change.state.value.replace("_", " ")
    note = markup.Mrkdwn("")
    if change.state is ChangeState.APPLIED and change.applied_at is not None:
        queued = schedule_validation_windows(
            store=core.tasks, change=change, applied_at=change.applied_at, requested_by=user
        )
        note = markup.format(" Re-validation snapshots scheduled ({} windows: +15m, +60m).", len(queued))
    if change.state is ChangeState.VALIDATED:
        reproduced = [
            str(task.result.get("window"))
            for task in core.tasks.tasks(incident_key=change.incident_key, kind=TaskKind.VALIDATION_WINDOW)
            if task.result and task.result.get("change_id") == change.id and task.result.get("reproduces")
        ]
        if reproduced:
            note += markup.format(
                " Careful: the original failure still reproduced in window(s) {}; "
                "the metric improved, the incident may not be fixed.",
                ", ".join(reproduced),
            )
    headline = markup.format("{} marked change #{} *{}*.{}", markup.mention(user), change.id, verb, note)
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
        comment=markup.format(
            "Change #{}: gain {} across {} windows.",
            change.id,
            "repeated" if change.gain_repeated else "did NOT repeat",
            windows,
        ),
    )
