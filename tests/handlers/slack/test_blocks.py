"""Block Kit builders stay inside Slack's limits, and the validator catches blocks that would not."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot import markup
from bot.incidents.service import IncidentView, RoleView
from handlers.slack.blocks import common as blocks

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _incident(**changes: object) -> IncidentView:
    values: dict[str, object] = {
        "key": "INC-0042",
        "title": "t",
        "target": "ml/train",
        "workload_key": "ml/train",
        "status": "investigating",
        "severity": None,
        "verdict_layer": None,
        "channel_id": "C1",
        "thread_ts": "1.2",
        "opened_by": "U1",
        "opened_at": NOW,
        "updated_at": NOW,
        "resolved_at": None,
        "roles": (RoleView(role="commander", user_id="U1"),),
    }
    values.update(changes)
    return IncidentView(**values)  # type: ignore[arg-type]


def test_the_root_message_names_the_incident_status_and_roles() -> None:
    root = blocks.validate_blocks(blocks.incident_root(incident=_incident()))
    assert root[0] == blocks.header("INC-0042: ml/train")
    assert "commander <@U1>" in root[1]["text"]["text"]


def test_a_very_long_target_is_clipped_to_the_header_limit() -> None:
    root = blocks.validate_blocks(blocks.incident_root(incident=_incident(target="x" * 400)))
    assert len(root[0]["text"]["text"]) == blocks.MAX_HEADER_TEXT


def test_the_open_list_of_many_incidents_stays_valid() -> None:
    incidents = [_incident(key=f"INC-{n:04d}", target=f"ml/train-{n}-" + "y" * 150) for n in range(400)]
    blocks.validate_blocks(blocks.open_list(incidents=incidents))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([blocks.section("x")] * 51, "51 blocks"),
        ([{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}], "3001 chars"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}], "header text 151"),
        ([{"type": "header", "text": {"type": "mrkdwn", "text": "x"}}], "plain_text"),
        (
            [
                {
                    "type": "actions",
                    "elements": [{"type": "button", "text": {"type": "plain_text", "text": "b" * 76}}],
                }
            ],
            "button",
        ),
        (
            [
                {
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": "ok"},
                    "accessory": {"type": "button", "text": {"type": "plain_text", "text": "b" * 76}},
                }
            ],
            "button",
        ),
        ([{"type": "context", "elements": []}], "context"),
        ([{"type": "banner"}], "unknown block type"),
    ],
)
def test_the_validator_rejects_what_slack_would(bad: list[dict[str, object]], message: str) -> None:
    with pytest.raises(blocks.BlockLimitError, match=message):
        blocks.validate_blocks(bad)


def test_builders_clip_instead_of_breaking_limits() -> None:
    assert len(blocks.section("x" * 5000)["text"]["text"]) == blocks.MAX_SECTION_TEXT
    assert len(blocks.button(text="b" * 100, action_id="a")["text"]["text"]) == blocks.MAX_BUTTON_TEXT


def test_echoed_user_text_cannot_ping_a_channel_a_group_or_a_person() -> None:
    text = "heads up <!channel> and <!here|here> and <!subteam^S0OPS|@oncall> cc <@U0BOB>"
    quieted = markup.render(markup.format("{} noted: {}", markup.mention("U0ALICE"), text))
    assert "<!" not in quieted and "<@U0BOB>" not in quieted
    assert quieted.startswith("<@U0ALICE> noted:")
    assert "&lt;!channel&gt;" in quieted and "oncall" in quieted
