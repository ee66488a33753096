"""Every button and modal: acked at once, acted on in a lazy worker, refusals told only to the clicker.

Buttons: re-run snapshot and the owner picker (findings), change applied/validated/rolled back, snooze
reminders, write postmortem. Modal: the change form. A double click acts once (`handlers.slack.once`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot import markup
from bot.changes.service import ChangeError
from bot.evidence.report import SnapshotUnavailable
from bot.incidents.errors import IncidentError
from bot.schedule.tasks import SNOOZE_ACTION_ID, TaskKind
from handlers.ops import logs
from handlers.slack import replies
from handlers.slack.blocks import changes as change_blocks
from handlers.slack.blocks import findings as findings_blocks
from handlers.slack.commands.incident import POSTMORTEM_ACTION
from handlers.slack.router import UsageError
from handlers.slack.services import Services

log = logging.getLogger(__name__)

SNOOZE = timedelta(hours=1)
Work = Callable[[dict[str, Any], WebClient], None]


def _where(body: dict[str, Any]) -> tuple[str, str]:
    """(user, channel) of an interactive payload; the channel falls back to the user's DM."""
    user = str((body.get("user") or {}).get("id", ""))
    channel = (body.get("channel") or {}).get("id", "") or (body.get("container") or {}).get("channel_id", "")
    return user, str(channel or user)


def register(app: App, services: Services) -> None:
    """Attach every button and the change form to the one app."""
    core = services.core

    def guarded(work: Work, *, failure: str = "That action failed; nothing was half-saved. Try again.") -> Work:
        def run(body: dict[str, Any], client: WebClient) -> None:
            user, channel = _where(body)
            with logs.bound(**logs.action_context(body)):
                try:
                    work(body, client)
                except (ChangeError, IncidentError, UsageError) as error:
                    replies.ephemeral(client, channel=channel, user=user, text=markup.of_error(error))
                except Exception:
                    log.exception("button or form action failed")
                    replies.ephemeral(client, channel=channel, user=user, text=failure)
                finally:
                    services.work.end()

        return run

    def just_ack(ack: Ack) -> None:
        services.work.begin()  # the lazy worker ends it, so shutdown, tests and the demo can wait for it
        ack()

    def on_rerun(body: dict[str, Any], client: WebClient) -> None:
        user, _channel = _where(body)
        incident = core.incidents.get(incident_key=str(body["actions"][0].get("value", "")))
        core.policy.require_cluster_read(actor=user, what="re-run snapshots")  # refused before anything is posted
        replies.post(
            client,
            incident,
            text=markup.format("{} asked for a fresh snapshot of `{}`…", markup.mention(user), incident.target),
        )
        try:
            report = core.incidents.run_snapshot(incident_key=incident.key, settings=core.settings, actor=user)
        except SnapshotUnavailable as error:
            replies.post(client, incident, text=markup.format("No snapshot was taken: {}", str(error)))
            return
        replies.post_findings(client, incident=incident, report=report)

    def on_change_state(body: dict[str, Any], client: WebClient) -> None:
        action = body["actions"][0]
        user, _channel = _where(body)
        operation = {
            change_blocks.APPLIED_ACTION: core.changes.apply,
            change_blocks.VALIDATED_ACTION: core.changes.validate,
            change_blocks.ROLLED_BACK_ACTION: core.changes.roll_back,
        }[action["action_id"]]
        outcome = operation(change_id=int(action["value"]), actor=user)
        message = body.get("message") or {}
        if message.get("ts"):
            incident = core.incidents.get(incident_key=outcome.change.incident_key)
            replies.update_message(
                client,
                channel=incident.channel_id,
                ts=str(message["ts"]),
                text=f"Change #{outcome.change.id}",
                blocks_=change_blocks.change_blocks(change=outcome.change),
            )
        replies.after_change_state(core=core, client=client, user=user, outcome=outcome)

    def on_assign_owner(body: dict[str, Any], client: WebClient) -> None:
        action = body["actions"][0]
        key = str(action.get("block_id", "")).removeprefix("assign_")
        incident = core.incidents.get(incident_key=key)
        replies.assign(
            core=core,
            client=client,
            incident=incident,
            user_id=action["selected_user"],
            role="owner",
            actor=body["user"]["id"],
        )

    def on_snooze(body: dict[str, Any], client: WebClient) -> None:
        key = body["actions"][0]["value"]
        incident = core.incidents.get(incident_key=key)
        moved = core.tasks.postpone(kind=TaskKind.UPDATE_REMINDER, incident_key=key, until=core.clock() + SNOOZE)
        replies.post(
            client,
            incident,
            text=markup.format(
                "{} snoozed update reminders for {} by 1 hour ({} reminder(s) moved).",
                markup.mention(str(body["user"]["id"])),
                key,
                moved,
            ),
        )

    def on_postmortem(body: dict[str, Any], client: WebClient) -> None:
        replies.post_postmortem(core=core, client=client, incident_key=body["actions"][0]["value"])

    app.action(findings_blocks.RERUN_ACTION)(
        ack=just_ack,
        lazy=[guarded(on_rerun, failure="The re-run of the snapshot failed; the incident is unchanged. Try again.")],
    )
    for action_id in (
        change_blocks.APPLIED_ACTION,
        change_blocks.VALIDATED_ACTION,
        change_blocks.ROLLED_BACK_ACTION,
    ):
        app.action(action_id)(ack=just_ack, lazy=[guarded(on_change_state)])
    app.action(change_blocks.ASSIGN_OWNER_ACTION)(ack=just_ack, lazy=[guarded(on_assign_owner)])
    app.action(SNOOZE_ACTION_ID)(ack=just_ack, lazy=[guarded(on_snooze)])
    app.action(POSTMORTEM_ACTION)(ack=just_ack, lazy=[guarded(on_postmortem)])

    def ack_change_form(ack: Ack, body: dict[str, Any]) -> None:
        _fields, _meta, errors = change_blocks.read_change_submission(view=body["view"])
        if errors:
            ack(response_action="errors", errors=errors)
            return
        services.work.begin()
        ack()

    def record_change(body: dict[str, Any], client: WebClient) -> None:
        fields, meta, errors = change_blocks.read_change_submission(view=body["view"])
        if errors:
            return
        user = body["user"]["id"]
        outcome = core.changes.propose(incident_key=meta["incident"], proposed_by=user, **fields)
        incident = core.incidents.get(incident_key=meta["incident"])
        replies.post(
            client,
            incident,
            text=markup.format("{} proposed change #{}: {}", markup.mention(user), outcome.change.id, outcome.change.what),
            blocks_=change_blocks.change_blocks(change=outcome.change, warning=outcome.warning),
        )

    app.view(change_blocks.CHANGE_MODAL_CALLBACK)(
        ack=ack_change_form,
        lazy=[guarded(record_change, failure="The change could not be recorded; nothing was half-saved. Submit it again.")],
    )
