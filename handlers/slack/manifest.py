"""The Slack app manifest: exactly the scopes, the /triage command and the interactivity the bot uses."""

from __future__ import annotations

from typing import Any

import yaml

from handlers.ops.server import EVENTS_PATH
from handlers.slack.app import BOT_SCOPES

COMMAND_DESCRIPTION = "Incidents for GPU jobs: job, status, assign, note, list, help"
USAGE_HINT = "job <id> | status <status> | assign @person <role> | note <text> | list | help"


def manifest(*, base_url: str | None, socket_mode: bool, name: str = "triage-bot") -> dict[str, Any]:
    """The manifest as data; `base_url` is where Slack reaches `serve` (ignored in Socket Mode)."""
    request_url = (
        None if socket_mode else f"{(base_url or 'https://triage.example.com').rstrip('/')}{EVENTS_PATH}"
    )
    command: dict[str, Any] = {
        "command": "/triage",
        "description": COMMAND_DESCRIPTION,
        "usage_hint": USAGE_HINT,
        "should_escape": True,
    }
    interactivity: dict[str, Any] = {"is_enabled": True}
    if request_url:
        command["url"] = request_url
        interactivity["request_url"] = request_url
    return {
        "display_information": {
            "name": name,
            "description": "Bounded diagnostic snapshots of GPU jobs, classified by layer, and the incident record.",
        },
        "features": {
            "bot_user": {"display_name": name, "always_online": True},
            "slash_commands": [command],
        },
        "oauth_config": {"scopes": {"bot": list(BOT_SCOPES)}},
        "settings": {
            "interactivity": interactivity,
            "org_deploy_enabled": False,
            "socket_mode_enabled": socket_mode,
            "token_rotation_enabled": False,
        },
    }


def manifest_yaml(*, base_url: str | None, socket_mode: bool) -> str:
    """YAML to paste into https://api.slack.com/apps -> Create New App -> From a manifest."""
    return yaml.safe_dump(
        manifest(base_url=base_url, socket_mode=socket_mode), sort_keys=False, allow_unicode=True
    )
