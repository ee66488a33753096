"""JSON log lines: stdlib loggers come out as JSON with the bound context, and context never leaks."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest
import structlog

from handlers.ops import logs


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """configure() onto a buffer, then restore the root logger and structlog as they were."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    logs.configure()
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        structlog.reset_defaults()
        structlog.contextvars.clear_contextvars()


def test_a_stdlib_log_line_is_json_with_the_bound_incident_and_extras(captured: io.StringIO) -> None:
    with logs.bound(subcommand="status", slack_user="U0ALICE"):
        logs.bind_incident("INC-0007")
        logging.getLogger("handlers.example").warning("moved to %s", "mitigated", extra={"outcome": "ok"})
    logging.getLogger("handlers.example").warning("after the command")
    first, after = (json.loads(line) for line in captured.getvalue().splitlines())
    assert first["event"] == "moved to mitigated" and first["level"] == "warning"
    assert (first["incident"], first["subcommand"], first["slack_user"], first["outcome"]) == (
        "INC-0007",
        "status",
        "U0ALICE",
        "ok",
    )
    assert "incident" not in after and "subcommand" not in after  # nothing leaks to the thread's next task


def test_a_click_binds_its_user_action_and_the_incident_its_value_names() -> None:
    body = {
        "user": {"id": "U1"},
        "actions": [{"action_id": "rerun_snapshot", "value": "INC-0003", "action_ts": "1.2"}],
    }
    assert logs.action_context(body) == {
        "slack_user": "U1",
        "action_id": "rerun_snapshot",
        "request_id": "1.2",
        "incident": "INC-0003",
    }
    assert "incident" not in logs.action_context({**body, "actions": [{"action_id": "x", "value": "42"}]})
