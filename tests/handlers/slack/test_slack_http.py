"""The real Bolt app behind the real server, driven by signed HTTP requests, talking to the Slack stand-in."""

from __future__ import annotations

import json
import time
from typing import Any

import requests

from bot.lab.slack_api import RecordedCall
from handlers.slack.router import CommandContext, Subcommand
from tests.support.slack import BotUnderTest, shown, sign, slash_body


def _texts(calls: list[RecordedCall]) -> list[str]:
    return [str(call.params.get("text", "")) for call in calls]


def _blocks(call: RecordedCall) -> list[dict[str, Any]]:
    raw = call.params.get("blocks") or []
    return json.loads(raw) if isinstance(raw, str) else raw


def test_job_posts_a_root_message_and_threads_the_findings_under_it(bot: BotUnderTest) -> None:
    response = bot.command("job ml/train-llama")
    assert response.status_code == 200
    assert "Opening an incident" in response.text
    posts = bot.slack.calls_to("chat.postMessage")
    root, opened, findings, owner_picker = posts
    assert root.params["channel"] == "C0INC" and "thread_ts" not in root.params
    assert "Who owns INC-0001" in owner_picker.params["text"]
    assert _blocks(root)[0]["text"]["text"] == "INC-0001: ml/train-llama"
    root_ts = bot.services.incidents.get(incident_key="INC-0001").thread_ts
    assert opened.params["thread_ts"] == root_ts and findings.params["thread_ts"] == root_ts
    assert "commander" in opened.params["text"]
    assert "runtime.oom_killed" in json.dumps(_blocks(findings))
    update = bot.slack.calls_to("chat.update")[-1]
    assert update.params["ts"] == root_ts and "Verdict" in json.dumps(_blocks(update))
    assert all(call.token == bot.slack.token for call in bot.slack.calls)


def test_a_second_job_for_the_same_workload_links_the_open_incident(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    bot.slack.clear()
    bot.command("job job/ml/train-llama", user_id="U0BOB")
    assert bot.slack.calls_to("chat.postMessage") == []
    (ephemeral,) = bot.slack.calls_to("chat.postEphemeral")
    assert ephemeral.params["user"] == "U0BOB"
    assert "INC-0001 is already open" in ephemeral.params["text"]
    assert "archives/C0INC" in ephemeral.params["text"]
    assert len(bot.services.incidents.list_open()) == 1


def test_a_wrong_signature_is_refused_with_401_and_does_nothing(bot: BotUnderTest) -> None:
    body = slash_body(text="job ml/train-llama")
    forged = sign(body=body, secret="not-the-secret")
    response = bot.post(body, headers=forged, signed=False)
    assert response.status_code == 401
    unsigned = bot.post(body, signed=False)
    assert unsigned.status_code == 401
    assert bot.slack.calls == []
    assert bot.services.incidents.list_open() == []


def test_a_replayed_request_with_an_old_timestamp_is_refused(bot: BotUnderTest) -> None:
    body = slash_body(text="job ml/train-llama")
    stale = sign(body=body, timestamp=int(time.time()) - 60 * 10)
    assert bot.post(body, headers=stale, signed=False).status_code == 401
    assert bot.services.incidents.list_open() == []


def test_a_slack_retry_of_the_same_command_does_not_open_twice_or_post_twice(bot: BotUnderTest) -> None:
    body = slash_body(text="job ml/train-llama", trigger_id="1234.5678.retry")
    assert bot.post(body).status_code == 200
    assert (
        bot.post(body, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}).status_code
        == 200
    )
    assert bot.services.work.wait_idle(timeout=30)
    roots = [call for call in bot.slack.calls_to("chat.postMessage") if "thread_ts" not in call.params]
    assert len(roots) == 1
    assert bot.slack.calls_to("chat.postEphemeral") == []


def test_an_unknown_subcommand_is_answered_in_the_ack_with_what_to_type(bot: BotUnderTest) -> None:
    response = bot.command("frobnicate now")
    assert response.status_code == 200
    assert "`frobnicate` is not a /triage subcommand" in response.text
    assert "job" in response.text and "/triage help" in response.text
    assert bot.slack.calls == []


def test_a_malformed_job_id_is_answered_with_the_accepted_forms(bot: BotUnderTest) -> None:
    response = bot.command("job Bad_Namespace/x")
    assert "invalid namespace" in response.text and "/triage job <id>" in shown(response.text)
    assert "Traceback" not in response.text
    assert bot.services.incidents.list_open() == []


def test_a_missing_job_id_says_what_to_type(bot: BotUnderTest) -> None:
    response = bot.command("job")
    assert "Missing job id" in response.text


def test_a_status_in_a_channel_without_an_incident_gets_an_ephemeral_pointer(bot: BotUnderTest) -> None:
    bot.command("status mitigated", channel_id="C0QUIET")
    (ephemeral,) = bot.slack.calls_to("chat.postEphemeral")
    assert ephemeral.params["channel"] == "C0QUIET"
    assert "no open incident in this channel" in ephemeral.params["text"]
    assert "/triage job" in ephemeral.params["text"]


def test_status_assign_and_note_reply_in_the_thread_and_refresh_the_root(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    root_ts = bot.services.incidents.get(incident_key="INC-0001").thread_ts
    bot.slack.clear()
    bot.command("assign <@U0BOB|bob> owner:runtime")
    bot.command("status identified")  # the commander (the opener) moves the incident
    bot.command("note INC-0001 raised the memory limit to 96Gi", user_id="U0BOB")
    posts = bot.slack.calls_to("chat.postMessage")
    (direct,) = [call for call in posts if call.params["channel"] == "U0BOB"]
    assert "You are now owner:runtime on INC-0001" in direct.params["text"]
    replies = [call for call in posts if call is not direct]
    assert [call.params["thread_ts"] for call in replies] == [root_ts] * 3
    assert "made <@U0BOB> *owner:runtime*" in replies[0].params["text"]
    assert "*identified*" in replies[1].params["text"]
    assert "raised the memory limit to 96Gi" in replies[2].params["text"]
    updates = bot.slack.calls_to("chat.update")
    assert len(updates) == 2 and "identified" in json.dumps(_blocks(updates[-1]))
    assert "owner:runtime <@U0BOB>" in json.dumps(_blocks(updates[0]))
    kinds = [item.kind for item in bot.services.incidents.timeline("INC-0001")]
    assert kinds[-3:] == ["assign", "status", "note"]


def test_a_note_cannot_make_the_bot_ping_the_whole_channel(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    bot.slack.clear()
    bot.command("note <!channel> the node is back")
    (reply,) = bot.slack.calls_to("chat.postMessage")
    assert "<!channel>" not in reply.params["text"] and "the node is back" in reply.params["text"]
    assert bot.services.incidents.timeline("INC-0001")[-1].text == "<!channel> the node is back"


def test_assign_without_a_real_mention_explains_how_to_pick_a_person(bot: BotUnderTest) -> None:
    response = bot.command("assign @bob owner")
    assert "@ autocomplete" in response.text


def test_list_and_help_answer_only_the_caller(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    bot.slack.clear()
    bot.command("list", user_id="U0CAROL")
    bot.command("help", user_id="U0CAROL")
    listed, helped = bot.slack.calls_to("chat.postEphemeral")
    assert listed.params["user"] == "U0CAROL" and "INC-0001" in json.dumps(_blocks(listed))
    assert "/triage assign" in json.dumps(_blocks(helped))
    assert bot.slack.calls_to("chat.postMessage") == []


def test_a_slack_error_on_the_root_message_is_reported_and_the_next_job_posts_it(bot: BotUnderTest) -> None:
    bot.slack.fail_next("chat.postMessage", error="not_in_channel")
    bot.command("job ml/train-llama")
    (ephemeral,) = bot.slack.calls_to("chat.postEphemeral")
    told = ephemeral.params["text"]
    assert "not_in_channel" in told and "/invite" in told and "INC-0001" in told and "Traceback" not in told
    assert bot.services.incidents.get(incident_key="INC-0001").thread_ts is None
    bot.command("job ml/train-llama")
    assert bot.services.incidents.get(incident_key="INC-0001").thread_ts is not None
    assert len(bot.services.incidents.list_open()) == 1


def test_where_the_bot_cannot_post_the_error_reaches_the_caller_through_response_url(
    bot: BotUnderTest,
) -> None:
    bot.slack.fail_next("chat.postMessage", error="not_in_channel")
    bot.slack.fail_next("chat.postEphemeral", error="not_in_channel")
    bot.command("job ml/train-llama", channel_id="D0DIRECT")
    (fallback,) = bot.slack.calls_to("response_url")
    assert fallback.params["response_type"] == "ephemeral"
    assert "not_in_channel" in fallback.params["text"]


def test_a_job_for_an_incident_still_being_opened_does_not_post_a_second_root(bot: BotUnderTest) -> None:
    from bot.evidence.targets import parse_target

    bot.services.incidents.open_for_target(
        target=parse_target("ml/racing"), channel_id="C0INC", opened_by="U0BOB"
    )
    bot.command("job ml/racing")
    assert bot.slack.calls_to("chat.postMessage") == []
    (ephemeral,) = bot.slack.calls_to("chat.postEphemeral")
    assert "being opened right now" in ephemeral.params["text"]


def test_a_rate_limited_call_is_retried_after_retry_after(bot: BotUnderTest) -> None:
    bot.slack.rate_limit_next("chat.postMessage", retry_after=1)
    bot.command("job ml/train-llama")
    posts = bot.slack.calls_to("chat.postMessage")
    assert len(posts) == 5  # the refused root, its retry, the opening reply, the findings, the owner picker
    assert posts[0].params == posts[1].params
    assert bot.services.incidents.get(incident_key="INC-0001").thread_ts is not None


def test_a_slack_5xx_is_retried_and_the_incident_posts_normally(bot: BotUnderTest) -> None:
    bot.slack.server_error_next("chat.postMessage", status=503)
    bot.command("job ml/train-llama")
    roots = [call for call in bot.slack.calls_to("chat.postMessage") if "thread_ts" not in call.params]
    assert len(roots) == 2 and roots[0].params == roots[1].params
    assert bot.slack.calls_to("chat.postEphemeral") == []


def test_slack_failing_after_the_snapshot_keeps_it_and_says_where_it_is(bot: BotUnderTest) -> None:
    bot.slack.server_error_next("chat.update", status=500, times=3)
    bot.command("job ml/train-llama")
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 1
    (ephemeral,) = bot.slack.calls_to("chat.postEphemeral")
    assert "INC-0001 is open and its snapshot is stored" in ephemeral.params["text"]


def test_a_failing_snapshot_keeps_the_incident_and_says_so_in_the_thread(bot: BotUnderTest) -> None:
    def broken(**_kwargs: Any) -> Any:
        raise ConnectionError("cluster unreachable")

    bot.services.incidents.diagnoser = broken
    bot.command("job ml/train-llama")
    assert "The snapshot failed (ConnectionError)" in _texts(bot.slack.calls_to("chat.postMessage"))[-2]
    assert bot.services.incidents.timeline("INC-0001")[-1].kind == "snapshot_failed"


def test_an_unexpected_error_becomes_a_short_ephemeral_with_a_reference(bot: BotUnderTest) -> None:
    def explode(_ctx: CommandContext) -> None:
        raise KeyError("internal detail")

    bot.services.subcommands["explode"] = Subcommand(
        name="explode", usage="explode", summary="test", run=explode
    )
    bot.command("explode")
    (ephemeral,) = bot.slack.calls_to("chat.postEphemeral")
    assert "failed; nothing was half-saved" in ephemeral.params["text"]
    assert "internal detail" not in ephemeral.params["text"] and "Traceback" not in ephemeral.params["text"]


def test_every_subcommand_is_defined_once_and_help_lists_them_all(bot: BotUnderTest) -> None:
    from handlers.slack import commands

    table = commands.registry()
    assert table.keys() == bot.services.subcommands.keys()
    assert {"job", "status", "assign", "note", "snapshot", "list", "help", "compare", "fabric", "change",
            "measure", "handoff", "postmortem", "resolve", "reopen", "severity", "prevent"} <= set(table)
    bot.command("help")
    (ephemeral,) = bot.slack.calls_to("chat.postEphemeral")
    listed = shown(json.dumps(ephemeral.params.get("blocks")))
    assert all(f"/triage {item.usage}" in listed for item in table.values())


def test_health_readiness_and_metrics_endpoints(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    bot.command("frobnicate")
    assert requests.get(f"{bot.server.url}/healthz", timeout=5).json() == {"status": "ok"}
    ready = requests.get(f"{bot.server.url}/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["checks"] == {
        "database": "ok",
        "slack": "ok",
        "scheduler": "ok",
    }
    metrics = requests.get(f"{bot.server.url}/metrics", timeout=5).text
    assert 'triage_commands_total{outcome="ok",subcommand="job"} 1.0' in metrics
    assert 'triage_commands_total{outcome="rejected",subcommand="frobnicate"} 1.0' in metrics
    assert 'triage_open_incidents{severity="high"} 1.0' in metrics
    assert "triage_ack_latency_seconds_count 2.0" in metrics
    assert requests.get(f"{bot.server.url}/nope", timeout=5).status_code == 404


def test_readiness_fails_when_slack_rejects_the_token(bot: BotUnderTest) -> None:
    bot.slack.fail_next("auth.test", error="invalid_auth")
    ready = requests.get(f"{bot.server.url}/readyz", timeout=5)
    assert ready.status_code == 503
    assert "invalid_auth" in ready.json()["checks"]["slack"]


def _click(bot: BotUnderTest, *, user: str, action: dict[str, Any]) -> requests.Response:
    """A signed block_actions payload, as Slack sends it when someone clicks in a message."""
    import urllib.parse

    payload = {
        "type": "block_actions",
        "team": {"id": "T0LAB"},
        "api_app_id": "A0TRIAGE",
        "token": "deprecated",
        "trigger_id": f"{time.time_ns()}.lab",
        "user": {"id": user},
        "channel": {"id": "C0INC"},
        "container": {"type": "message", "channel_id": "C0INC"},
        "actions": [action],
    }
    response = bot.post(urllib.parse.urlencode({"payload": json.dumps(payload)}))
    assert bot.services.work.wait_idle(timeout=30), "lazy work did not finish"
    return response


def test_the_findings_message_offers_a_rerun_button_and_an_owner_picker(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    findings = next(call for call in bot.slack.calls_to("chat.postMessage") if "rerun_snapshot" in json.dumps(_blocks(call)))
    elements = _blocks(findings)[-1]["elements"]
    assert [(item["type"], item["action_id"]) for item in elements] == [
        ("button", "rerun_snapshot"),
        ("users_select", "assign_owner"),
    ]
    assert elements[0]["value"] == "INC-0001"


def test_the_rerun_button_takes_and_posts_a_second_snapshot(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 1
    bot.slack.clear()
    response = _click(
        bot, user="U0BOB", action={"type": "button", "action_id": "rerun_snapshot", "value": "INC-0001"}
    )
    assert response.status_code == 200
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 2
    posts = bot.slack.calls_to("chat.postMessage")
    assert "<@U0BOB> asked for a fresh snapshot" in str(posts[0].params["text"])
    assert "runtime.oom_killed" in json.dumps(_blocks(posts[-1]))


def test_the_snapshot_subcommand_retakes_the_channels_incident_snapshot(bot: BotUnderTest) -> None:
    bot.command("job ml/train-llama")
    bot.command("snapshot")
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 2
    assert bot.command("snapshot extra words").status_code == 200
    assert len(bot.services.incidents.snapshots(incident_key="INC-0001")) == 2
