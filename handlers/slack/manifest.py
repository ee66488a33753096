"""The Slack app manifest: exactly the scopes, the /triage command and the interactivity the bot uses."""

from __future__ import annotations

from typing import Annotated, Any

import typer
import yaml

from handlers.ops.paths import EVENTS_PATH

COMMAND_DESCRIPTION = "Incidents for GPU jobs: job, status, assign, note, list, help"
# Exactly the bot token scopes the bot uses (the manifest prints these).
BOT_SCOPES: list[str] = [
    "commands",  # the /triage slash command
    "chat:write",  # root messages, thread replies, ephemeral replies, chat.update
    "chat:write.public",  # post in public channels without being invited first
    "users:read",  # users.info: names for handoffs
    "channels:read",  # conversations.info: channel names for records
    "files:write",  # files.uploadV2: charts and reports in the thread
]
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


def register(app: Any) -> None:
    """Attach `manifest` to the terminal."""
    @app.command("manifest")
    def manifest_command(
        url: Annotated[str | None, typer.Option("--url", help="Public base URL of `serve` (HTTP mode).")] = None,
        socket_mode: Annotated[bool, typer.Option("--socket-mode", help="Manifest for Socket Mode.")] = False,
    ) -> None:
        """Print the Slack app manifest (YAML) to create the app."""
        typer.echo(manifest_yaml(base_url=url, socket_mode=socket_mode), nl=False)
