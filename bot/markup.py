"""Message text in Slack's mrkdwn: what the bot composed is markup, everything else is data.

A workload's logs, a user's note or an API server's error can contain `<!channel>`, `<@U…>`,
`<https://evil|Click to re-authenticate>` or backticks that end a code block. Such text is only ever
data: `Mrkdwn` marks text the bot composed (its own mentions, *bold*, `code`), and every value put into
it goes through `escape` on the way in (`format`, `+`, `join`), the way markupsafe treats HTML.

At the one place where text becomes a Slack message (`handlers/slack/replies.py`), `render` escapes
any plain `str` entirely and passes `Mrkdwn` through a last guard that keeps only the bot's own user
mentions and channel links live, so a template that forgot to escape still cannot broadcast or link.
"""

from __future__ import annotations

import builtins
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# What bot-composed markup may contain inside angle brackets: a user mention or a channel link.
USER_ID = re.compile(r"[UW][A-Z0-9]{1,30}")
_ALLOWED_TOKEN = r"@[UW][A-Z0-9]{1,30}|#[CG][A-Z0-9]{1,30}(?:\|[a-z0-9_-]{1,80})?"
_UNLISTED_ANGLE = re.compile(r"<(?!(?:" + _ALLOWED_TOKEN + r")>)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_TRAILING_PARTIAL = re.compile(r"(?:&[a-z]{0,4}|<[^>]{0,90})\Z")
CUT = "…"


class Mrkdwn(str):
    """Text the bot composed: its markup is live and every value in it was escaped on the way in."""

    __slots__ = ()

    def __add__(self, other: str) -> Mrkdwn:
        return Mrkdwn(str.__add__(self, escape(other)))

    def __radd__(self, other: str) -> Mrkdwn:
        return Mrkdwn(str.__add__(escape(other), self))

    def format(self, *args: Any, **kwargs: Any) -> Mrkdwn:
        return Mrkdwn(_FORMATTER.vformat(self, args, kwargs))

    def format_map(self, mapping: Mapping[str, Any]) -> Mrkdwn:
        return Mrkdwn(_FORMATTER.vformat(self, (), mapping))

    def join(self, items: Iterable[Any]) -> Mrkdwn:
        return Mrkdwn(str.join(self, (escape(item) for item in items)))


class _EscapingFormatter(string.Formatter):
    """str.format where each replacement field is formatted first, then escaped unless it is Mrkdwn."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Mrkdwn):
            return value if not format_spec else escape(builtins.format(str(value), format_spec))
        return escape(builtins.format(value, format_spec))


_FORMATTER = _EscapingFormatter()


def escape(value: Any) -> Mrkdwn:
    """Data as inert mrkdwn: `&`, `<`, `>` as entities, backticks as look-alikes (no way out of a code
    span), control and bidi characters as `?`. Mrkdwn passes unchanged."""
    if isinstance(value, Mrkdwn):
        return value
    text = value if isinstance(value, str) else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "\u02cb")
    return Mrkdwn(_CONTROL.sub(lambda match: "" if match.group(0) == "\r" else "?", text))


def format(template: str, /, *args: Any, **kwargs: Any) -> Mrkdwn:
    """`template` is the bot's own markup; every argument is escaped unless it is Mrkdwn already."""
    return Mrkdwn(template).format(*args, **kwargs)


def join(separator: str, items: Iterable[Any]) -> Mrkdwn:
    """Items escaped, joined by the bot's own separator."""
    return Mrkdwn(separator).join(items)


def lines(items: Sequence[Any]) -> Mrkdwn:
    """One escaped item per line."""
    return join("\n", items)


def mention(user_id: str) -> Mrkdwn:
    """A live `<@U…>` for a Slack user id; anything that is not one is shown as text."""
    return Mrkdwn(f"<@{user_id}>") if USER_ID.fullmatch(user_id or "") else escape(user_id)


def mentions(user_ids: Iterable[str], *, separator: str = ", ") -> Mrkdwn:
    """Several mentions."""
    return Mrkdwn(separator).join(mention(item) for item in user_ids)


def channel(channel_id: str) -> Mrkdwn:
    """A live `<#C…>` channel link."""
    return Mrkdwn(f"<#{channel_id}>") if re.fullmatch(r"[CG][A-Z0-9]{1,30}", channel_id or "") else escape(channel_id)


def clip(text: str, *, limit: int, marker: str = CUT) -> str:
    """At most `limit` characters, the cut marked with `marker`; Mrkdwn stays Mrkdwn and is never cut
    inside an entity or a mention."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - len(marker))]
    if isinstance(text, Mrkdwn):
        return Mrkdwn(_TRAILING_PARTIAL.sub("", cut).rstrip() + marker)
    return cut + marker


def of_error(error: BaseException) -> Mrkdwn:
    """The message of an error the bot raised to tell a user what to do (IncidentError, ChangeError,
    UsageError, a policy refusal): the bot's own words, its mentions and `code` kept; what a user typed
    was echoed into it safely, and `render`'s guard disarms any broadcast or link. Never for collector,
    API or Slack errors: those are data (`escape`)."""
    message = error.args[0] if len(error.args) == 1 else str(error)
    return message if isinstance(message, Mrkdwn) else Mrkdwn(_CONTROL.sub("?", str(message)))


def guard(text: str) -> str:
    """The last line of defence for composed text: any `<` that does not open a user mention or a
    channel link is escaped, so no broadcast (`<!channel>`), link or stray markup survives."""
    return _UNLISTED_ANGLE.sub("&lt;", text)


def render(text: str) -> str:
    """What Slack receives: Mrkdwn guarded, anything else escaped entirely (it is data)."""
    return guard(text) if isinstance(text, Mrkdwn) else str(escape(text))


def render_blocks(blocks: Sequence[dict[str, Any]], *, limits: Mapping[str, int]) -> list[dict[str, Any]]:
    """Blocks with every mrkdwn text object rendered (and clipped to its block type's limit from
    `limits`, by block type, after escaping lengthened it); plain_text objects are not parsed by Slack."""
    return [_render_node(block, limit=limits.get(str(block.get("type")), 3000)) for block in blocks]


def _render_node(node: Any, *, limit: int) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "mrkdwn" and isinstance(node.get("text"), str):
            rendered = render(node["text"])
            if len(rendered) > limit:
                rendered = clip(Mrkdwn(rendered), limit=limit)
            return {**node, "text": str(rendered)}
        return {key: _render_node(value, limit=limit) for key, value in node.items()}
    if isinstance(node, list):
        return [_render_node(item, limit=limit) for item in node]
    return node


def inert_file_text(content: bytes) -> bytes:
    """A text file for upload: its Markdown kept, but `<!channel>`-style specials broken with a
    zero-width space so nothing in it can be read as a broadcast."""
    return content.replace(b"<!", "<\u200b!".encode())
