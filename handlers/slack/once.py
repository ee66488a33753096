"""Every signed interactive payload acts once: a double click (two block_actions with one action_ts), Slack's
retry of one (X-Slack-Retry-Num), or a captured modal submission replayed byte for byte is claimed in the same
processed_request table as slash commands, by any replica."""

from __future__ import annotations

import hashlib
import json
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


# Payloads that change something when acted on; option lookups (block_suggestion) only read and are answered
# every time.
ACTING_PAYLOADS = frozenset({"view_submission", "view_closed", "shortcut", "message_action"})


def payload_fingerprint(body: dict[str, Any]) -> str | None:
    """A modal submission, a closed modal or a shortcut: the same payload (a replay, a retry) gives the same
    fingerprint, anything a user changed (a corrected field, a new trigger) a new one."""
    kind = str(body.get("type") or "")
    if kind not in ACTING_PAYLOADS:
        return None
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return f"{kind}:{hashlib.sha256(canonical.encode()).hexdigest()}"


def _what(body: dict[str, Any]) -> str:
    """`action:<id>` or `view_submission:<callback_id>` for the claim's kind and the metrics."""
    if body.get("type") == "block_actions":
        return f"action:{(body.get('actions') or [{}])[0].get('action_id', '')}"
    view = body.get("view") if isinstance(body.get("view"), dict) else {}
    return f"{body.get('type', '')}:{view.get('callback_id') or body.get('callback_id') or ''}"


def register(app: App, services: Services) -> None:
    """A global middleware: a repeated click or a replayed submission is acked (200) and goes no further."""

    @app.middleware
    def once_per_payload(body: dict[str, Any], next: Callable[[], Any]) -> Any:
        fingerprint = action_fingerprint(body) or payload_fingerprint(body)
        if fingerprint is None:
            return next()
        what = _what(body)
        if services.incidents.claim_request(fingerprint=fingerprint, kind=what[:64]):
            return next()
        log.info("repeated %s ignored", what, extra={"action_id": what})
        services.metrics.count(subcommand=what[:40], outcome="duplicate")
        return BoltResponse(status=200, body="")
