"""Slack for the records area: installs it into the app (subcommands, buttons, the change form, the
snooze and postmortem buttons) and hands its scheduler to the server."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.changes.service import ChangeError
from bot.evidence import findings
from bot.incidents.policy import PermissionRefused
from bot.incidents.service import IncidentError
from bot.schedule.tasks import SNOOZE_ACTION_ID, JobKind, ensure_daily_prune
from handlers.ops import logs
from handlers.slack.app import make_web_client
from handlers.slack.blocks import changes as records_views
from handlers.slack.blocks import common as blocks
from handlers.slack.commands.records import subcommands
from handlers.slack.records_area import RecordsArea, build_area
from handlers.slack.replies import (
    POSTMORTEM_ACTION,
    after_change_state,
    assign,
    ephemeral,
    post,
    post_postmortem,
)
from handlers.slack.router import UsageError
from handlers.slack.services import Services

log = logging.getLogger(__name__)

SNOOZE = timedelta(hours=1)
__all__ = ["POSTMORTEM_ACTION", "RecordsArea", "install", "register"]


def install(
    services: Services, *, clock: Callable[[], datetime] = findings.utcnow, client: WebClient | None = None
) -> RecordsArea:
    """Build the area, hook its listeners into the app and hand the scheduler to the server."""
    area = build_area(
        services=services, client=client or make_web_client(settings=services.settings), clock=clock
    )
    services.extra_registrations.append(lambda app, svc: register(app, svc, area))
    services.scheduler = area.scheduler
    ensure_daily_prune(store=area.jobs, now=clock())  # housekeeping of the exactly-once table
    if services.settings.scheduler_enabled:
        area.scheduler.start()
    return area


def register(app: App, services: Services, area: RecordsArea) -> None:
    """Subcommands into the router (before the foundation's defaults) and the interactive listeners."""
    for subcommand in subcommands(area):
        services.subcommands[subcommand.name] = subcommand

    def guarded(
        work: Callable[[dict[str, Any], WebClient], None],
    ) -> Callable[[dict[str, Any], WebClient], None]:
        def run(body: dict[str, Any], client: WebClient) -> None:
            user = (body.get("user") or {}).get("id", "")
            channel = (body.get("channel") or {}).get("id", "") or (body.get("container") or {}).get(
                "channel_id", ""
            )
            with logs.bound(**logs.action_context(body)):
                try:
                    work(body, client)
                except (ChangeError, IncidentError, PermissionRefused, UsageError, ValueError) as error:
                    ephemeral(client, channel=channel or user, user=user, text=str(error))
                except Exception:
                    log.exception("records action failed")
                    ephemeral(
                        client,
                        channel=channel or user,
                        user=user,
                        text="That action failed; nothing was half-saved. Try again.",
                    )
                finally:
                    services.work.end()

        return run

    def just_ack(ack: Ack) -> None:
        services.work.begin()  # the lazy worker ends it, so tests and the demo can wait for the work
        ack()

    def on_change_state(body: dict[str, Any], client: WebClient) -> None:
        action = body["actions"][0]
        change_id = int(action["value"])
        user = body["user"]["id"]
        operation = {
            records_views.APPLIED_ACTION: area.changes.apply,
            records_views.VALIDATED_ACTION: area.changes.validate,
            records_views.ROLLED_BACK_ACTION: area.changes.roll_back,
        }[action["action_id"]]
        outcome = operation(change_id=change_id, actor=user)
        message = body.get("message") or {}
        if message.get("ts"):
            incident = services.incidents.get(incident_key=outcome.change.incident_key)
            client.chat_update(
                channel=incident.channel_id,
                ts=message["ts"],
                text=f"Change #{outcome.change.id}",
                blocks=blocks.validate_blocks(records_views.change_blocks(change=outcome.change)),
            )
        after_change_state(area=area, client=client, incidents=services.incidents, user=user, outcome=outcome)

    def on_assign_owner(body: dict[str, Any], client: WebClient) -> None:
        action = body["actions"][0]
        key = str(action.get("block_id", "")).removeprefix("assign_")
        incident = services.incidents.get(incident_key=key)
        assign(
            services=services,
            area=area,
            client=client,
            incident=incident,
            user_id=action["selected_user"],
            role="owner",
            actor=body["user"]["id"],
        )

    def on_snooze(body: dict[str, Any], client: WebClient) -> None:
        key = body["actions"][0]["value"]
        incident = services.incidents.get(incident_key=key)
        moved = area.jobs.postpone(
            kind=JobKind.UPDATE_REMINDER, incident_key=key, until=area.clock() + SNOOZE
        )
        post(
            client,
            incident,
            text=f"<@{body['user']['id']}> snoozed update reminders for {key} by 1 hour "
            f"({moved} reminder(s) moved).",
        )

    def on_postmortem(body: dict[str, Any], client: WebClient) -> None:
        post_postmortem(services=services, area=area, client=client, incident_key=body["actions"][0]["value"])

    for action_id in (
        records_views.APPLIED_ACTION,
        records_views.VALIDATED_ACTION,
        records_views.ROLLED_BACK_ACTION,
    ):
        app.action(action_id)(ack=just_ack, lazy=[guarded(on_change_state)])
    app.action(records_views.ASSIGN_OWNER_ACTION)(ack=just_ack, lazy=[guarded(on_assign_owner)])
    app.action(SNOOZE_ACTION_ID)(ack=just_ack, lazy=[guarded(on_snooze)])
    app.action(POSTMORTEM_ACTION)(ack=just_ack, lazy=[guarded(on_postmortem)])

    def ack_change_form(ack: Ack, body: dict[str, Any]) -> None:
        _fields, _meta, errors = records_views.read_change_submission(view=body["view"])
        if errors:
            ack(response_action="errors", errors=errors)
            return
        services.work.begin()
        ack()

    def record_change(body: dict[str, Any], client: WebClient) -> None:
        fields, meta, errors = records_views.read_change_submission(view=body["view"])
        if errors:
            return
        user = body["user"]["id"]
        try:
            outcome = area.changes.propose(incident_key=meta["incident"], proposed_by=user, **fields)
            incident = services.incidents.get(incident_key=meta["incident"])
            post(
                client,
                incident,
                text=f"<@{user}> proposed change #{outcome.change.id}: {outcome.change.what}",
                blocks_=records_views.change_blocks(change=outcome.change, warning=outcome.warning),
            )
        except (ChangeError, IncidentError) as error:
            ephemeral(client, channel=meta.get("channel") or user, user=user, text=str(error))
        except Exception:
            log.exception("recording a change failed")
            ephemeral(
                client,
                channel=meta.get("channel") or user,
                user=user,
                text="The change could not be recorded; nothing was half-saved. Submit it again.",
            )
        finally:
            services.work.end()

    app.view(records_views.CHANGE_MODAL_CALLBACK)(ack=ack_change_form, lazy=[record_change])
