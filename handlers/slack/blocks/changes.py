"""Block Kit for changes, measurements and records: built in Python, never inside templates."""

from __future__ import annotations

import json
from typing import Any

from bot import markup
from bot.changes.service import ChangeError, ChangeState, ChangeView

CHANGE_MODAL_CALLBACK = "triage_change_modal"
APPLIED_ACTION = "triage_change_applied"
VALIDATED_ACTION = "triage_change_validated"
ROLLED_BACK_ACTION = "triage_change_rolled_back"
ASSIGN_OWNER_ACTION = "assign_owner"
TEXT_LIMIT = 3000  # Slack's section text limit


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:150], "emoji": True}


def _input(
    block_id: str,
    label: str,
    *,
    placeholder: str,
    multiline: bool = False,
    optional: bool = False,
    max_length: int = 2000,
) -> dict[str, Any]:
    return {
        "type": "input",
        "block_id": block_id,
        "optional": optional,
        "label": _plain(label),
        "element": {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": multiline,
            "max_length": max_length,
            "placeholder": _plain(placeholder),
        },
    }


def change_modal(*, incident_key: str, channel: str, thread_ts: str) -> dict[str, Any]:
    """The `/triage change` modal: one lever, its expected effect and metric, a required rollback plan."""
    return {
        "type": "modal",
        "callback_id": CHANGE_MODAL_CALLBACK,
        "private_metadata": json.dumps(
            {"incident": incident_key, "channel": channel, "thread_ts": thread_ts}
        ),
        "title": _plain(f"Change {incident_key}"[:24]),
        "submit": _plain("Record change"),
        "close": _plain("Cancel"),
        "blocks": [
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": "Tune *one* variable at a time; "
                        "a change without a rollback plan is not recorded.",
                    }
                ],
            },
            _input(
                "what",
                "What changes",
                placeholder="Raise NCCL_IB_QPS_PER_CONNECTION from 1 to 4",
                multiline=True,
            ),
            _input(
                "variable",
                "The single variable tuned",
                placeholder="NCCL_IB_QPS_PER_CONNECTION",
                max_length=300,
            ),
            _input(
                "expected_effect", "Expected effect", placeholder="busbw back above 180 GB/s", multiline=True
            ),
            _input("metric", "Metric that shows it", placeholder="all-reduce busbw", max_length=200),
            _input("unit", "Unit", placeholder="GB/s", max_length=40, optional=True),
            _input("baseline", "Baseline value", placeholder="120", max_length=40, optional=True),
            _input("threshold", "Acceptance threshold", placeholder="180", max_length=40, optional=True),
            {
                "type": "input",
                "block_id": "direction",
                "label": _plain("Better is"),
                "element": {
                    "type": "static_select",
                    "action_id": "value",
                    "initial_option": {"text": _plain("higher"), "value": "higher"},
                    "options": [
                        {"text": _plain("higher"), "value": "higher"},
                        {"text": _plain("lower"), "value": "lower"},
                    ],
                },
            },
            _input(
                "rollback_plan",
                "Rollback plan",
                placeholder="set it back to 1 and restart the job",
                multiline=True,
            ),
            {
                "type": "input",
                "block_id": "approved_by",
                "optional": True,
                "label": _plain("Approved by"),
                "element": {
                    "type": "users_select",
                    "action_id": "value",
                    "placeholder": _plain("Who approved"),
                },
            },
        ],
    }


def _number(values: dict[str, Any], block_id: str, errors: dict[str, str]) -> float | None:
    text = ((values.get(block_id) or {}).get("value") or {}).get("value") or ""
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        errors[block_id] = "A number, like 120 or 0.5."
        return None


def read_change_submission(*, view: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The submitted fields as ChangeService.propose arguments, the modal's metadata, and field errors."""
    values = view.get("state", {}).get("values", {})

    def text(block_id: str) -> str:
        return (((values.get(block_id) or {}).get("value") or {}).get("value") or "").strip()

    errors: dict[str, str] = {}
    for required in ("what", "variable", "expected_effect", "metric", "rollback_plan"):
        if not text(required):
            errors[required] = (
                "Required." if required != "rollback_plan" else "A change needs a rollback plan."
            )
    baseline = _number(values, "baseline", errors)
    threshold = _number(values, "threshold", errors)
    direction = ((values.get("direction") or {}).get("value") or {}).get("selected_option") or {}
    approved = ((values.get("approved_by") or {}).get("value") or {}).get("selected_user") or ""
    fields = {
        "what": text("what"),
        "variable": text("variable"),
        "expected_effect": text("expected_effect"),
        "metric": text("metric"),
        "unit": text("unit"),
        "baseline": baseline,
        "threshold": threshold,
        "higher_is_better": direction.get("value", "higher") != "lower",
        "rollback_plan": text("rollback_plan"),
        "approved_by": approved,
    }
    return fields, json.loads(view.get("private_metadata") or "{}"), errors


def change_blocks(*, change: ChangeView, warning: str = "", headline: str = "") -> list[dict[str, Any]]:
    """A change in the thread, with the buttons its state allows; every field a user typed is escaped
    (`headline` is data unless the caller composed it as Mrkdwn)."""
    lines = [
        headline
        or markup.format("*Change #{}* ({}): {}", change.id, change.state.value.replace("_", " "), change.what),
        markup.format(
            "Variable: `{}` · Expected: {} · Metric: {}{}",
            change.variable,
            change.expected_effect,
            change.metric,
            f" ({change.unit})" if change.unit else "",
        ),
        markup.format("Rollback plan: {}", change.rollback_plan),
    ]
    if change.approved_by:
        lines.append(markup.format("Approved by {}", markup.mention(change.approved_by)))
    if change.measurements:
        lines.append(
            markup.format(
                "Windows: {} · gain repeated: {}",
                ", ".join(f"{m.window} {m.value:g} {m.unit}" for m in change.measurements),
                "yes" if change.gain_repeated else "no",
            )
        )
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": markup.clip(markup.lines(lines), limit=TEXT_LIMIT)}}
    ]
    if warning:
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": markup.clip(markup.format(":warning: {}", warning), limit=TEXT_LIMIT)}
                ],
            }
        )
    buttons = []
    if change.state is ChangeState.PROPOSED:
        buttons.append(("Applied", APPLIED_ACTION, "primary"))
    if change.state is ChangeState.APPLIED:
        buttons.append(("Validated", VALIDATED_ACTION, "primary"))
    if change.state in (ChangeState.PROPOSED, ChangeState.APPLIED, ChangeState.VALIDATED):
        buttons.append(("Rolled back", ROLLED_BACK_ACTION, "danger"))
    if buttons:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"change_{change.id}",
                "elements": [
                    {
                        "type": "button",
                        "text": _plain(label),
                        "action_id": action_id,
                        "value": str(change.id),
                        "style": style,
                    }
                    for label, action_id, style in buttons
                ],
            }
        )
    return blocks


def assign_owner_block(*, incident_key: str) -> dict[str, Any]:
    """The user picker offered on the findings message."""
    return {
        "type": "actions",
        "block_id": f"assign_{incident_key}",
        "elements": [
            {
                "type": "users_select",
                "action_id": ASSIGN_OWNER_ACTION,
                "placeholder": _plain("Assign an owner"),
            }
        ],
    }


MAX_CHANGE_ID = 999_999_999  # ids are 32-bit in the database; a longer number is a typo, not a change


def parse_change_id(*, text: str) -> int:
    """`#3` or `3` into 3, with a clear error (also for numbers no change could have)."""
    cleaned = (text or "").strip().lstrip("#")
    if not (cleaned.isascii() and cleaned.isdigit()) or not 0 < int(cleaned) <= MAX_CHANGE_ID:
        raise ChangeError(
            f"`{cleaned[:20]}` is not a change number: write it like `3` or `#3` "
            "(the number the change was posted with)."
        )
    return int(cleaned)
