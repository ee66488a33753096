"""`triage-bot demo`: play bot/lab/demo.py's incident through the real app, server and Slack stand-in, and
print every message the bot posted, readably."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from bot.config import Settings
from bot.lab import demo, slack_events
from bot.lab.slack_api import BOT_TOKEN, RecordedCall, SlackApiStandIn
from bot.records import files as record_files
from handlers.ops import server as http_server
from handlers.slack.app import build_slack_bot, http_app
from storage import db

SHOWN_METHODS = {
    "chat.postMessage": "posted",
    "chat.update": "updated",
    "chat.postEphemeral": "only you see",
    "views.open": "opened a view",
    "files.completeUploadExternal": "uploaded",
    "response_url": "only you see",
}


_MENTION = re.compile(r"<([@#])([A-Z0-9]+)(?:\|([^>]*))?>")


# Slack names some emoji differently from rich (`:large_orange_circle:` is rich's `:orange_circle:`).
_SLACK_ONLY_EMOJI = re.compile(r":large_(orange|yellow|blue|green|purple|brown)_circle:")


def _mention_name(match: re.Match[str]) -> str:
    return f"{match.group(1)}{match.group(3) or match.group(2)}"


def _readable(raw: str, *, style: str = "") -> Text:
    """Slack mrkdwn as a terminal shows it: mentions as @name, emoji codes as emoji, entities decoded."""
    plain = _SLACK_ONLY_EMOJI.sub(r":\1_circle:", _MENTION.sub(_mention_name, raw))
    plain = plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    text = Text.from_markup(escape(plain), emoji=True)
    if style:
        text.stylize(style)
    return text


def _block_text(block: dict[str, Any]) -> Text:
    kind = block.get("type")
    if kind == "header":
        return _readable(str(block.get("text", {}).get("text", "")), style="bold")
    if kind == "section":
        return _readable(str(block.get("text", {}).get("text", "")))
    if kind == "context":
        return _readable(
            "  ·  ".join(str(item.get("text", "")) for item in block.get("elements", [])), style="dim"
        )
    if kind == "divider":
        return Text("─" * 40, style="dim")
    if kind == "actions":
        return Text("  ".join(_control_label(item) for item in block.get("elements", [])), style="bold yellow")
    return Text(f"({kind} block)", style="dim")


def _control_label(element: dict[str, Any]) -> str:
    """A button as [ Label ], a picker as [ Placeholder ▾ ]."""
    if element.get("type") == "button":
        return f"[ {element.get('text', {}).get('text', '')} ]"
    return f"[ {element.get('placeholder', {}).get('text', element.get('type', ''))} ▾ ]"


def _uploaded_files(params: dict[str, Any]) -> Text:
    """files.completeUploadExternal: the titles of what was attached, and its comment."""
    files = params.get("files") or []
    files = json.loads(files) if isinstance(files, str) else files
    lines = [f"📎 {item.get('title') or item.get('id')}" for item in files]
    if params.get("initial_comment"):
        lines.append(str(params["initial_comment"]))
    return _readable("\n".join(lines))


def render_call(call: RecordedCall) -> Panel:
    """One Slack message as a terminal panel: where it went and what it said."""
    params = call.params
    raw_blocks = params.get("blocks")
    blocks = json.loads(raw_blocks) if isinstance(raw_blocks, str) else (raw_blocks or [])
    if call.method == "files.completeUploadExternal":
        body = _uploaded_files(params)
    elif blocks:
        body = Text("\n").join(_block_text(block) for block in blocks)
    else:
        body = _readable(str(params.get("text", "")))
    where = f"#{params.get('channel') or params.get('channel_id') or '?'}"
    if params.get("thread_ts"):
        where += " · in thread"
    if call.method in {"chat.postEphemeral", "response_url"}:
        where += f" · only {params.get('user')} sees this"
    style = "magenta" if call.method in {"chat.postEphemeral", "response_url"} else "cyan"
    return Panel(
        body,
        title=f"{SHOWN_METHODS.get(call.method, call.method)} · {where}",
        title_align="left",
        border_style=style,
    )


def play(*, out_dir: Path, console: Console) -> list[Path]:
    """Run the whole demo incident; return the record files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    choice = demo.pick_diagnoser()
    database_url = f"sqlite:///{out_dir / 'demo.db'}"
    (out_dir / "demo.db").unlink(missing_ok=True)
    secret = secrets.token_hex(16)
    with SlackApiStandIn() as slack:
        settings = Settings(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=secret,
            SLACK_API_URL=slack.base_url,
            DATABASE_URL=database_url,
            TRIAGE_SCHEDULER_ENABLED=False,
        )
        db.upgrade(url=database_url)
        clock = demo.DemoClock()
        # The scheduler stays off: the demo runs due tasks itself as its clock moves.
        bot = build_slack_bot(
            settings=settings, diagnoser=choice.diagnoser, diagnoser_label=choice.label, clock=clock
        )
        services = bot.services
        running = http_server.start_in_thread(wsgi_app=http_app(bot))
        console.rule(f"[bold]triage-bot demo[/bold] · diagnoser: {choice.label} · Slack: local stand-in")
        try:
            for number, step in enumerate(demo.demo_steps(target=choice.target), start=1):
                seen = len(slack.calls)
                if step.wait_minutes:
                    console.print(f"\n[bold yellow]{number}. {step.caption}[/bold yellow]")
                    clock.advance(minutes=step.wait_minutes)
                    services.core.runner.run_due()
                    for call in slack.calls[seen:]:
                        if call.method in SHOWN_METHODS:
                            console.print(render_call(call))
                    continue
                console.print(
                    f"\n[bold yellow]{number}. {step.caption}[/bold yellow]\n   @{step.user_id} types "
                    f"[bold]/triage {escape(_MENTION.sub(_mention_name, step.text))}[/bold]"
                )
                ack = _send(
                    url=running.url,
                    secret=secret,
                    user_id=step.user_id,
                    text=step.text,
                    number=number,
                    response_url=slack.response_url(f"demo-{number}"),
                )
                if ack:
                    console.print(f"   [dim]ack (only they see): {escape(ack)}[/dim]")
                services.work.wait_idle(timeout=60)
                for call in slack.calls[seen:]:
                    if call.method in SHOWN_METHODS:
                        console.print(render_call(call))
        finally:
            running.stop()
        latest = services.incidents.latest()
        if latest is None:
            raise RuntimeError("the demo opened no incident")
        written = record_files.write_records(core=services.core, incident_key=latest.key, out_dir=out_dir)
        bot.close()
    console.rule("[bold]records[/bold]")
    for path in written:
        console.print(f"wrote {path}")
    return written


def _send(*, url: str, secret: str, user_id: str, text: str, number: int, response_url: str) -> str:
    body = slack_events.slash_command_body(
        text=text,
        user_id=user_id,
        channel_id=demo.CHANNEL_ID,
        channel_name="incident-demo",
        trigger_id=f"demo.{number}.{secrets.token_hex(4)}",
        response_url=response_url,
    )
    response = slack_events.post_signed(base_url=url, body=body, secret=secret)
    response.raise_for_status()
    return response.text.strip()


DEFAULT_DEMO_DIR = Path("triage-demo")


def register(app: Any) -> None:
    """Attach `demo` to the terminal."""
    @app.command("demo")
    def demo_command(
        out: Annotated[Path, typer.Option("--out", help="Where to write the handoff and postmortem.")] = DEFAULT_DEMO_DIR,
    ) -> None:
        """Play one incident locally; write its handoff and postmortem."""
        import logging

        logging.basicConfig(level=logging.WARNING)
        play(out_dir=out, console=Console())
