"""Post a snapshot's findings in the incident thread, and re-run it from the findings message's button."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.evidence.report import SnapshotReport, SnapshotUnavailable
from bot.incidents.service import IncidentError, IncidentView
from handlers.ops import logs
from handlers.slack.blocks import common as blocks
from handlers.slack.blocks import findings as findings_blocks
from handlers.slack.services import Services

log = logging.getLogger(__name__)


class FindingsTooLarge(ValueError):
    """The rendered findings would break a Slack limit; raised instead of letting Slack cut them."""


def post_findings(*, client: WebClient, incident: IncidentView, report: SnapshotReport) -> str:
    """Findings grouped by layer, verdict first; the full Markdown is attached whenever the message shortened."""
    rendered = findings_blocks.render_findings(snapshot=report, incident_key=incident.key)
    problems = findings_blocks.validate_blocks(rendered.blocks)
    if problems:
        raise FindingsTooLarge("; ".join(problems))
    kwargs: dict[str, Any] = {
        "channel": incident.channel_id,
        "text": rendered.text_fallback,
        "blocks": rendered.blocks,
    }
    if incident.thread_ts:
        kwargs["thread_ts"] = incident.thread_ts
    ts = str(client.chat_postMessage(**kwargs)["ts"])
    if rendered.attachment is not None:
        client.files_upload_v2(
            channel=incident.channel_id,
            thread_ts=incident.thread_ts,
            filename=f"{incident.key}-findings.md",
            content=rendered.attachment.encode(),
            title=f"{incident.key} findings (full evidence)",
        )
    return ts


def register(app: App, services: Services) -> None:
    """The findings message's `rerun_snapshot` button: a fresh bounded snapshot, posted in the thread."""

    def ack_rerun(ack: Ack) -> None:
        services.work.begin()  # the lazy worker ends it, so tests and the demo can wait for the work
        ack()

    def rerun(body: dict[str, Any], client: WebClient) -> None:
        with logs.bound(**logs.action_context(body)):
            _rerun(body, client)

    def _rerun(body: dict[str, Any], client: WebClient) -> None:
        user = (body.get("user") or {}).get("id", "")
        key = str(body["actions"][0].get("value", ""))
        try:
            incident = services.incidents.get(incident_key=key)
            client.chat_postMessage(
                channel=incident.channel_id,
                thread_ts=incident.thread_ts,
                text=f"<@{user}> asked for a fresh snapshot of `{incident.target}`…",
            )
            report = services.incidents.run_snapshot(
                incident_key=key, settings=services.settings, actor=user or "unknown"
            )
            post_findings(client=client, incident=incident, report=report)
        except SnapshotUnavailable as error:
            client.chat_postMessage(
                channel=incident.channel_id,
                thread_ts=incident.thread_ts,
                text=f"No snapshot was taken: {blocks.quiet(str(error))}",
            )
        except IncidentError as error:
            client.chat_postEphemeral(channel=(body.get("channel") or {}).get("id", user), user=user,
                                      text=str(error))
        except Exception:
            log.exception("re-run of the snapshot for %s failed", key)
            client.chat_postEphemeral(
                channel=(body.get("channel") or {}).get("id", user),
                user=user,
                text=f"The re-run of {key}'s snapshot failed; the incident is unchanged. Try again.",
            )
        finally:
            services.work.end()

    app.action(findings_blocks.RERUN_ACTION)(ack=ack_rerun, lazy=[rerun])
