"""Requests as Slack sends them to the bot: signed slash commands and interactive payloads (demo, tests, benches)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.parse
from typing import Any

import requests

EVENTS_PATH = "/slack/events"


def signature_headers(*, body: str, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """`X-Slack-Request-Timestamp` and `X-Slack-Signature` exactly as Slack computes them (v0 HMAC-SHA256)."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}


def slash_command_body(
    *,
    text: str,
    user_id: str,
    channel_id: str,
    trigger_id: str,
    response_url: str,
    channel_name: str = "incidents",
    team_id: str = "T0LAB",
) -> str:
    """A form-encoded `/triage` body with the fields Slack sends."""
    return urllib.parse.urlencode(
        {
            "token": "deprecated-verification-token",
            "team_id": team_id,
            "team_domain": "lab",
            "channel_id": channel_id,
            "channel_name": channel_name,
            "user_id": user_id,
            "user_name": user_id.lower(),
            "command": "/triage",
            "text": text,
            "api_app_id": "A0TRIAGE",
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger_id,
        }
    )


def interactive_body(payload: dict[str, Any]) -> str:
    """A form-encoded interactive request (`payload=<json>`), as Slack posts clicks and form submissions."""
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def post_signed(*, base_url: str, body: str, secret: str, timeout: float = 30) -> requests.Response:
    """POST a body to the bot's `/slack/events`, signed with the app's signing secret."""
    headers = {"Content-Type": "application/x-www-form-urlencoded", **signature_headers(body=body, secret=secret)}
    return requests.post(f"{base_url}{EVENTS_PATH}", data=body.encode(), headers=headers, timeout=timeout)
