"""Slack's published Block Kit limits, checked in one place before anything is posted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELD_TEXT = 2000
MAX_SECTION_FIELDS = 10
MAX_HEADER_TEXT = 150
MAX_CONTEXT_TEXT = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_SELECT_PLACEHOLDER = 150
MAX_ACTION_ID = 255
MAX_ACTION_VALUE = 2000
MAX_BLOCK_ID = 255

# Block types we send or may receive back in a view; checked for presence only.
_OPAQUE_BLOCKS = frozenset({"divider", "image", "input", "rich_text", "file", "video"})
_SELECTS = frozenset({"users_select", "static_select", "conversations_select", "channels_select"})


class BlockLimitError(ValueError):
    """The blocks break one of Slack's limits; Slack would reject the message with invalid_blocks."""


def _text_of(obj: Any) -> str:
    return obj.get("text", "") if isinstance(obj, dict) else ""


def _text_object(*, where: str, obj: Any, limit: int, kinds: tuple[str, ...], what: str = "text") -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in kinds:
        return [f"{where}: text object must be one of {kinds}"]
    text = _text_of(obj)
    problems = []
    if not text.strip():
        problems.append(f"{where}: {what} is empty")
    if len(text) > limit:
        problems.append(f"{where}: {what} {len(text)} chars, limit {limit}")
    return problems


def _element(*, where: str, element: dict[str, Any]) -> list[str]:
    kind = element.get("type")
    problems: list[str] = []
    if kind == "button":
        problems += _text_object(
            where=where, obj=element.get("text"), limit=MAX_BUTTON_TEXT, kinds=("plain_text",), what="button text"
        )
        if len(str(element.get("value", ""))) > MAX_ACTION_VALUE:
            problems.append(f"{where}: value over {MAX_ACTION_VALUE} chars")
    elif kind in _SELECTS:
        problems += _text_object(
            where=where, obj=element.get("placeholder"), limit=MAX_SELECT_PLACEHOLDER, kinds=("plain_text",),
            what="placeholder",
        )
    if ("action_id" in element or kind in _SELECTS) and not 0 < len(str(element.get("action_id", ""))) <= MAX_ACTION_ID:
            problems.append(f"{where}: action_id missing or over {MAX_ACTION_ID} chars")
    return problems


def _block(*, index: int, block: dict[str, Any]) -> list[str]:
    kind = block.get("type")
    where = f"block {index} ({kind})"
    problems: list[str] = []
    if len(str(block.get("block_id", ""))) > MAX_BLOCK_ID:
        problems.append(f"{where}: block_id over {MAX_BLOCK_ID} chars")
    if kind == "header":
        problems += _text_object(
            where=where, obj=block.get("text"), limit=MAX_HEADER_TEXT, kinds=("plain_text",), what="header text"
        )
    elif kind == "section":
        fields = block.get("fields", [])
        if "text" in block:
            problems += _text_object(
                where=where, obj=block["text"], limit=MAX_SECTION_TEXT, kinds=("mrkdwn", "plain_text")
            )
        elif not fields:
            problems.append(f"{where}: needs text or fields")
        if len(fields) > MAX_SECTION_FIELDS:
            problems.append(f"{where}: {len(fields)} fields, limit {MAX_SECTION_FIELDS}")
        for number, field in enumerate(fields):
            problems += _text_object(
                where=f"{where} field {number}", obj=field, limit=MAX_SECTION_FIELD_TEXT,
                kinds=("mrkdwn", "plain_text"),
            )
        if isinstance(block.get("accessory"), dict):
            problems += _element(where=f"{where} accessory", element=block["accessory"])
    elif kind == "context":
        elements = block.get("elements", [])
        if not 0 < len(elements) <= MAX_CONTEXT_ELEMENTS:
            problems.append(f"{where}: {len(elements)} elements, allowed 1..{MAX_CONTEXT_ELEMENTS}")
        for number, element in enumerate(elements):
            if element.get("type") == "image":
                continue
            problems += _text_object(
                where=f"{where} element {number}", obj=element, limit=MAX_CONTEXT_TEXT, kinds=("mrkdwn", "plain_text")
            )
    elif kind == "actions":
        elements = block.get("elements", [])
        if not 0 < len(elements) <= MAX_ACTIONS_ELEMENTS:
            problems.append(f"{where}: {len(elements)} elements, allowed 1..{MAX_ACTIONS_ELEMENTS}")
        for number, element in enumerate(elements):
            problems += _element(where=f"{where} element {number}", element=element)
    elif kind not in _OPAQUE_BLOCKS:
        problems.append(f"{where}: unknown block type")
    return problems


def problems(blocks: Sequence[dict[str, Any]]) -> list[str]:
    """Every limit these blocks break, as readable lines; empty when Slack would accept them."""
    found = [f"{len(blocks)} blocks, limit {MAX_BLOCKS}"] if len(blocks) > MAX_BLOCKS else []
    for index, block in enumerate(blocks):
        found += _block(index=index, block=block)
    return found


def checked(blocks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks unchanged, or BlockLimitError naming every broken limit."""
    found = problems(blocks)
    if found:
        raise BlockLimitError("; ".join(found))
    return list(blocks)
