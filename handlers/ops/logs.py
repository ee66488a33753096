"""JSON log lines on stderr (structlog), stdlib `logging` routed through the same renderer.

Configured once by `serve`, never at import time. Context bound with `bind_incident`/`bound` (structlog
contextvars) rides on every line logged in that thread or task, stdlib loggers included.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]
_INCIDENT_KEY = re.compile(r"^INC-\d{1,9}$")

# stdlib records also carry their `extra={...}` fields into the JSON line.
_FOREIGN: list[Any] = [*_SHARED, structlog.stdlib.ExtraAdder()]


def configure(*, level: int = logging.INFO) -> None:
    """Every log line, ours or a library's, becomes one JSON object on stderr."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_FOREIGN,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one INFO line per poll is noise


def bind_incident(key: str) -> None:
    """From here on in this context, every log line says which incident it is about."""
    if key:
        structlog.contextvars.bind_contextvars(incident=key)


@contextmanager
def bound(**values: Any) -> Iterator[None]:
    """Bind context for a block (a command, an action, a scheduled job), then restore what was there."""
    had_incident = "incident" in structlog.contextvars.get_contextvars()
    try:
        with structlog.contextvars.bound_contextvars(
            **{name: value for name, value in values.items() if value not in (None, "")}
        ):
            yield
    finally:
        if not had_incident:  # a key bound inside the block must not leak to the pool thread's next task
            structlog.contextvars.unbind_contextvars("incident")


def action_context(body: dict[str, Any]) -> dict[str, str]:
    """What to bind for a button or menu: who clicked what (and which incident, when the value names one)."""
    actions = body.get("actions") or [{}]
    action = actions[0] if isinstance(actions[0], dict) else {}
    context = {
        "slack_user": str((body.get("user") or {}).get("id", "")),
        "action_id": str(action.get("action_id", "")),
        "request_id": str(action.get("action_ts", "")),
    }
    value = str(action.get("value", ""))
    if _INCIDENT_KEY.match(value):
        context["incident"] = value
    return context
