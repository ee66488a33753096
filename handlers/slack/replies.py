"""What the records area posts in Slack, shared by its subcommands and its buttons: handoff, postmortem,
assignment with a DM, and a change's new state (validation windows queued or cancelled)."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.changes import charts
from bot.changes.service import ChangeOutcome, ChangeState, ChangeView
from bot.incidents.policy import parse_role, require_commander, role_expectations
from bot.incidents.service import IncidentView
from bot.records import build as records
from bot.records import bundle
from bot.schedule.tasks import JobKind, schedule_validation_windows, validation_prefix
from handlers.slack.blocks import changes as records_views
from handlers.slack.blocks import common as blocks
from handlers.slack.records_area import RecordsArea
from handlers.slack.services import Services

log = logging.getLogger(__name__)

HANDOFF_ROLES = frozenset({"owner", "commander"})
POSTMORTEM_ACTION = "triage_write_postmortem"


def post(
    client: WebClient, incident: IncidentView, *, text: str, blocks_: list[dict[str, Any]] | None = None
) -> str:
    kwargs: dict[str, Any] = {"channel": incident.channel_id, "text": blocks.clip(text, limit=3900)}
    if incident.thread_ts:
        kwargs["thread_ts"] = incident.thread_ts
    if blocks_:
        kwargs["blocks"] = blocks.validate_blocks(blocks_)
    return str(client.chat_postMessage(**kwargs)["ts"])


def post_handoff(
    *, services: Services, area: RecordsArea, client: WebClient, incident_key: str, reason: str
) -> str:
    """The handoff as a thread reply and a Markdown file; returns the Markdown."""
    incident = services.incidents.get(incident_key=incident_key)
    record = records.build_handoff(
        data=area.incident_data(incidents=services.incidents, incident_key=incident_key), now=area.clock()
    )
    markdown = records.render_handoff(record=record)
    post(client, incident, text=f":page_facing_up: Handoff for {incident.key} ({reason})\n{markdown}")
    client.files_upload_v2(
        channel=incident.channel_id,
        thread_ts=incident.thread_ts,
        filename=f"{incident.key}-handoff.md",
        content=markdown.encode(),
        title=f"{incident.key} handoff",
    )
    services.incidents.add_timeline_entry(
        incident_key=incident.key, actor="triage-bot", kind="handoff", text=f"Handoff posted ({reason})"
    )
    return markdown


def post_postmortem(*, services: Services, area: RecordsArea, client: WebClient, incident_key: str) -> str:
    """The postmortem as a Markdown file in the thread, with each change's chart beside it."""
    incident = services.incidents.get(incident_key=incident_key)
    data = area.incident_data(incidents=services.incidents, incident_key=incident_key)
    markdown = records.render_postmortem(record=records.build_postmortem(data=data, now=area.clock()))
    client.files_upload_v2(
        channel=incident.channel_id,
        thread_ts=incident.thread_ts,
        filename=f"{incident.key}-postmortem.md",
        content=markdown.encode(),
        title=f"{incident.key} postmortem",
        initial_comment=f":memo: Postmortem for {incident.key}. Fill any _not recorded_ section with "
        "`/triage note summary: ...`, `impact:`, `root cause:`, `remediation:` and run `/triage postmortem` again.",
    )
    for path, png in bundle.chart_files(data=data).items():
        client.files_upload_v2(
            channel=incident.channel_id,
            thread_ts=incident.thread_ts,
            filename=path.rsplit("/", 1)[-1],
            content=png,
            title=path,
        )
    services.incidents.add_timeline_entry(
        incident_key=incident.key, actor="triage-bot", kind="postmortem", text="Postmortem written"
    )
    return markdown


def _commanders(incident: IncidentView) -> tuple[str, ...]:
    return incident.holders("commander")


def require_incident_commander(
    services: Services, incident: IncidentView, *, actor: str, action: str
) -> None:
    require_commander(
        actor=actor,
        commanders=_commanders(incident),
        admins=services.settings.admin_user_ids,
        action=action,
        incident_key=incident.key,
    )


def ephemeral(client: WebClient, *, channel: str, user: str, text: str) -> None:
    try:
        client.chat_postEphemeral(channel=channel, user=user, text=text)
    except SlackApiError as error:
        log.warning("could not send an ephemeral reply: %s", error.response.get("error"))


def assign(
    *,
    services: Services,
    area: RecordsArea,
    client: WebClient,
    incident: IncidentView,
    user_id: str,
    role: str,
    actor: str,
) -> IncidentView:
    """Assign, announce in the thread, DM the assignee what is expected, hand off when owner/commander moved."""
    role = parse_role(text=role)
    if role == "commander" and _commanders(incident):
        require_incident_commander(services, incident, actor=actor, action="reassign the commander of")
    updated = services.incidents.assign(incident_key=incident.key, user_id=user_id, role=role, actor=actor)
    post(client, updated, text=f"<@{actor}> made <@{user_id}> *{role}* of {updated.key}.")
    client.chat_postMessage(
        channel=user_id, text=role_expectations(role=role, incident_key=updated.key, target=updated.target)
    )
    if role in HANDOFF_ROLES:
        post_handoff(
            services=services,
            area=area,
            client=client,
            incident_key=updated.key,
            reason=f"{role} is now <@{user_id}>",
        )
    return updated


def after_change_state(
    *, area: RecordsArea, client: WebClient, incidents: Any, user: str, outcome: ChangeOutcome
) -> None:
    """Announce a change's new state; applied queues validation windows, rolled back cancels them."""
    change = outcome.change
    incident = incidents.get(incident_key=change.incident_key)
    verb = change.state.value.replace("_", " ")
    note = ""
    if change.state is ChangeState.APPLIED and change.applied_at is not None:
        queued = schedule_validation_windows(store=area.jobs, change=change, applied_at=change.applied_at)
        note = f" Re-validation snapshots scheduled ({len(queued)} windows: +15m, +60m)."
    if change.state is ChangeState.VALIDATED:
        reproduced = [
            str(job.result.get("window"))
            for job in area.jobs.jobs(incident_key=change.incident_key, kind=JobKind.VALIDATION_WINDOW)
            if job.result and job.result.get("change_id") == change.id and job.result.get("reproduces")
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
        blocks_=records_views.change_blocks(change=change, warning=outcome.warning, headline=headline),
    )
    if change.state is ChangeState.VALIDATED:
        upload_chart(client, incident, change)
    if change.state is ChangeState.ROLLED_BACK:
        area.jobs.cancel(
            kind=JobKind.VALIDATION_WINDOW,
            incident_key=change.incident_key,
            dedupe_prefix=validation_prefix(change_id=change.id),
        )


def upload_chart(client: WebClient, incident: IncidentView, change: ChangeView) -> None:
    if len({item.window for item in change.measurements}) < 2:
        return
    client.files_upload_v2(
        channel=incident.channel_id,
        thread_ts=incident.thread_ts,
        filename=f"{incident.key}-change-{change.id}.png",
        content=charts.change_chart_png(change=change),
        title=f"Change #{change.id}: {change.metric} per window",
        initial_comment=f"Change #{change.id}: gain {'repeated' if change.gain_repeated else 'did NOT repeat'} "
        f"across {len({item.window for item in change.measurements})} windows.",
    )
