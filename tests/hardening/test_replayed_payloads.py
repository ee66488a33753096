"""Every signed interactive payload acts once: a modal submission replayed byte for byte records one change,
while a user who corrects a refused form and submits again is heard."""

from __future__ import annotations

import json

from tests.support.slack import BotUnderTest, interaction_body

FIELDS = {
    "what": "Raise NCCL_IB_QPS_PER_CONNECTION from 1 to 4",
    "variable": "NCCL_IB_QPS_PER_CONNECTION",
    "expected_effect": "busbw back above 180 GB/s",
    "metric": "all-reduce busbw",
    "rollback_plan": "set it back to 1",
}


def _submission(**fields: str) -> dict:
    values = {name: {"value": {"type": "plain_text_input", "value": value}} for name, value in fields.items()}
    return {
        "type": "view_submission",
        "team": {"id": "T0LAB"},
        "user": {"id": "U0ALICE"},
        "api_app_id": "A0TRIAGE",
        "trigger_id": "1337.42.abcdef",
        "view": {
            "id": "V0CHANGE1",
            "type": "modal",
            "callback_id": "triage_change_modal",
            "hash": "1700000000.abcdef",
            "private_metadata": json.dumps({"incident": "INC-0001", "channel": "C0INC", "thread_ts": ""}),
            "state": {"values": values},
        },
    }


def test_a_change_form_replayed_three_times_records_one_change(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    body = interaction_body(_submission(**FIELDS))
    for _ in range(3):
        assert bot.interact({}, body=body).status_code == 200
    assert len(bot.services.core.changes.for_incident(incident_key="INC-0001")) == 1
    proposed = [call for call in bot.slack.calls_to("chat.postMessage") if "proposed change" in str(call.params)]
    assert len(proposed) == 1


def test_a_corrected_form_after_a_refused_one_is_recorded(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    refused = bot.interact(_submission(**{**FIELDS, "rollback_plan": ""}))
    assert refused.json()["response_action"] == "errors"
    bot.interact(_submission(**FIELDS))
    assert len(bot.services.core.changes.for_incident(incident_key="INC-0001")) == 1


def test_two_different_forms_from_one_user_are_both_recorded(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    bot.interact(_submission(**FIELDS))
    bot.interact(_submission(**{**FIELDS, "what": "Lower the batch size from 32 to 16", "variable": "batch"}))
    assert len(bot.services.core.changes.for_incident(incident_key="INC-0001")) == 2
