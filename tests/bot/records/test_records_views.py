"""The change form and change messages: within Slack's limits, and read back into plain fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from bot.changes.service import ChangeState, ChangeView
from handlers.slack.blocks import changes as records_views
from handlers.slack.blocks import common as blocks


def _answers(view: dict, **values: str) -> dict:
    state = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        if element["type"] == "plain_text_input":
            state[block["block_id"]] = {"value": {"value": values.get(block["block_id"], "")}}
        elif element["type"] == "static_select":
            chosen = values.get(block["block_id"], "higher")
            state[block["block_id"]] = {"value": {"selected_option": {"value": chosen}}}
        else:
            state[block["block_id"]] = {"value": {"selected_user": values.get(block["block_id"])}}
    return {**view, "state": {"values": state}}


def test_the_change_form_fits_slacks_modal_limits_and_carries_the_thread() -> None:
    view = records_views.change_modal(incident_key="INC-0042", channel="C1", thread_ts="1.2")
    assert len(view["title"]["text"]) <= 24 and len(view["blocks"]) <= 100
    assert json.loads(view["private_metadata"]) == {"incident": "INC-0042", "channel": "C1", "thread_ts": "1.2"}
    rollback = next(block for block in view["blocks"] if block.get("block_id") == "rollback_plan")
    assert rollback["optional"] is False


def test_a_submission_reads_into_propose_arguments() -> None:
    view = records_views.change_modal(incident_key="INC-0042", channel="C1", thread_ts="1.2")
    fields, meta, errors = records_views.read_change_submission(view=_answers(
        view, what="w", variable="v", expected_effect="e", metric="m", unit="ms", baseline="900",
        threshold="400", direction="lower", rollback_plan="r", approved_by="U1"))
    assert errors == {} and meta["incident"] == "INC-0042"
    assert fields["baseline"] == 900.0 and fields["threshold"] == 400.0 and fields["higher_is_better"] is False
    assert fields["approved_by"] == "U1"


def test_a_submission_without_rollback_or_with_a_bad_number_gets_field_errors() -> None:
    view = records_views.change_modal(incident_key="INC-0042", channel="C1", thread_ts="1.2")
    _, _, errors = records_views.read_change_submission(view=_answers(
        view, what="w", variable="v", expected_effect="e", metric="m", baseline="fast"))
    assert errors == {"rollback_plan": "A change needs a rollback plan.", "baseline": "A number, like 120 or 0.5."}


def test_change_messages_pass_the_block_validator_and_offer_the_next_states() -> None:
    change = ChangeView(
        id=3, incident_key="INC-0042", what="x" * 4000, variable="v", expected_effect="e", metric="m", unit="ms",
        baseline=1.0, threshold=2.0, higher_is_better=True, rollback_plan="r", approved_by="U1", proposed_by="U2",
        state=ChangeState.APPLIED, proposed_at=datetime(2026, 11, 20, tzinfo=UTC), applied_at=None,
        validated_at=None, rolled_back_at=None,
    )
    built = blocks.validate_blocks(records_views.change_blocks(change=change, warning="one lever at a time"))
    actions = [element["action_id"] for element in built[-1]["elements"]]
    assert actions == [records_views.VALIDATED_ACTION, records_views.ROLLED_BACK_ACTION]
