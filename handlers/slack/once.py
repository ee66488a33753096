"""Buttons act once: a double click (two block_actions with one action_ts) or Slack's retry of one
(X-Slack-Retry-Num) is claimed in the same processed_request table as slash commands, by any replica."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import App, BoltResponse

from handlers.slack.services import Services

log = logging.getLogger(__name__)


def action_fingerprint(body: dict[str, Any]) -> str | None:
    """(team, user, action_id, action_ts) of a block_actions payload; None for anything else."""
    if body.get("type") != "block_actions" or not body.get("actions"):
        return None
    action = body["actions"][0]
    action_ts = str(action.get("action_ts") or "")
    if not action_ts:
        return None
    team = str((body.get("team") or {}).get("id", ""))
    user = str((body.get("user") or {}).get("id", ""))
    return f"act:{team}:{user}:{action.get('action_id', '')}:{action_ts}"


def register(app: App, services: Services) -> None:
    """A global middleware: a repeated click is acked (200) and goes no further."""

    @app.middleware
    def once_per_click(body: dict[str, Any], next: Callable[[], Any]) -> Any:
        fingerprint = action_fingerprint(body)
        if fingerprint is None:
            return next()
        action_id = str(body["actions"][0].get("action_id", ""))
        if services.incidents.claim_request(fingerprint=fingerprint, kind=f"action:{action_id}"[:64]):
            return next()
        log.info("repeated click on %s ignored", action_id, extra={"action_id": action_id})
        services.metrics.count(subcommand=f"action:{action_id}"[:40], outcome="duplicate")
        return BoltResponse(status=200, body="")
