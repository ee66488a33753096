"""Nothing a workload or a user wrote becomes live Slack markup: over real HTTP, every post, block,
handoff and uploaded file carries their text inert, while the bot's own mentions still work."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import markup
from bot.config import Settings
from bot.evidence import findings
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from bot.lab.demo import minimal_diagnoser
from tests.hardening.conftest import FaultySlackApi, running_bot
from tests.support.slack import BotUnderTest, shown

HOSTILE = "<!channel> <!here> <!subteam^S0OPS|@oncall> <@U0EVIL> <http://evil.invalid|Click to re-authenticate> ```pwned"
LIVE_MARKUP = ("<!", "<@U0EVIL", "<http", "```pwned")


def hostile_diagnoser(*, target: Target, settings: Settings) -> SnapshotReport:
    """The minimal lab cluster, but every text the workload controls (log excerpt, env value, event
    message, placement) carries Slack markup."""
    report = minimal_diagnoser(target=target, settings=settings)
    finding = report.findings[0]
    evidence = dataclasses.replace(finding.evidence[0], excerpt=f"log: {HOSTILE}", observed=f"env FOO={HOSTILE}")
    return dataclasses.replace(
        report,
        verdict=dataclasses.replace(report.verdict, summary=f"event: {HOSTILE}"),
        findings=(dataclasses.replace(finding, evidence=(evidence,), summary=f"pod says {HOSTILE}"),),
        placement={"image": f"registry/x:{HOSTILE}"},
        unexplained=(
            findings.Observation(
                source="kubernetes", kind="event", subject="pod/ml/x", text=f"Warning {HOSTILE}",
                command="kubectl get events", observed_at=report.taken_at, fields={},
            ),
        ),
    )


@pytest.fixture
def hostile_bot(slack_stand_in: FaultySlackApi, tmp_path: Path) -> Iterator[BotUnderTest]:
    with running_bot(
        database_url=f"sqlite:///{tmp_path / 'markup.db'}", slack=slack_stand_in, diagnoser=hostile_diagnoser
    ) as bot:
        slack_stand_in.clear()
        yield bot


def _posted(bot: BotUnderTest) -> list[str]:
    """Every text and block the bot sent to Slack, as JSON strings."""
    sent = []
    for method in ("chat.postMessage", "chat.update", "chat.postEphemeral", "files.completeUploadExternal"):
        for call in bot.slack.calls_to(method):
            sent.append(json.dumps(call.params, ensure_ascii=False))
    return sent


def _assert_inert(texts: list[str]) -> None:
    for text in texts:
        for live in LIVE_MARKUP:
            assert live not in text, f"{live!r} reached Slack live in {text[:300]!r}"


def test_workload_text_in_findings_and_in_the_handoff_on_owner_change_reaches_slack_inert(
    hostile_bot: BotUnderTest,
) -> None:
    hostile_bot.command("job ml/train-7", user_id="U0ALICE")
    hostile_bot.command("assign <@U0BOB|bob> owner", user_id="U0ALICE")
    sent = _posted(hostile_bot)
    _assert_inert(sent)
    handoff = next(text for text in sent if "Handoff for INC-0001" in text)
    assert "Click to re-authenticate" in shown(handoff)  # shown as text, not dropped
    assert "<@U0BOB>" in handoff  # the bot's own mention of the new owner stays live
    assert any("<@U0ALICE> made <@U0BOB> *owner*" in text for text in sent)
    uploads = list(hostile_bot.slack.uploads.values())
    assert uploads and all(b"<!channel>" not in content and b"<!here>" not in content for content in uploads)


def test_user_text_in_notes_changes_prevention_and_the_next_handoff_reaches_slack_inert(
    bot: BotUnderTest,
) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    bot.slack.clear()
    bot.command(f"note rollback plan: {HOSTILE}", user_id="U0ALICE")
    bot.command(f"note next: {HOSTILE}", user_id="U0ALICE")
    bot.command(f"change NCCL_X | {HOSTILE} | faster | busbw | set it back {HOSTILE}", user_id="U0ALICE")
    bot.command(f"prevent <@U0BOB|bob> 2030-01-01 {HOSTILE} | check {HOSTILE}", user_id="U0ALICE")
    bot.command("handoff", user_id="U0ALICE")
    sent = _posted(bot)
    assert len(sent) >= 5
    _assert_inert(sent)
    assert any("<@U0ALICE> noted:" in text for text in sent)
    assert any(":shield: Prevention #1 for <@U0BOB>" in text for text in sent)


def test_user_text_in_the_change_form_reaches_slack_inert(bot: BotUnderTest) -> None:
    bot.command("job ml/train-7", user_id="U0ALICE")
    bot.slack.clear()
    view = {
        "type": "modal",
        "callback_id": "triage_change_modal",
        "private_metadata": json.dumps({"incident": "INC-0001", "channel": "C0INC", "thread_ts": ""}),
        "state": {"values": {
            name: {"value": {"type": "plain_text_input", "value": f"{name} {HOSTILE}"}}
            for name in ("what", "variable", "expected_effect", "metric", "rollback_plan")
        }},
    }
    bot.interact({"type": "view_submission", "user": {"id": "U0ALICE"}, "view": view})
    sent = _posted(bot)
    assert any("proposed change #1" in text for text in sent)
    _assert_inert(sent)


def test_composed_text_keeps_the_bots_mentions_and_escapes_every_value() -> None:
    text = markup.format("{} made {} owner: {}", markup.mention("U0ALICE"), markup.mention("U0BOB"), HOSTILE)
    rendered = markup.render(text)
    assert rendered.startswith("<@U0ALICE> made <@U0BOB> owner: &lt;!channel&gt;")
    _assert_inert([rendered])


def test_plain_text_at_the_posting_boundary_is_data_even_when_it_looks_like_markup() -> None:
    assert markup.render(HOSTILE) == str(markup.escape(HOSTILE))
    _assert_inert([markup.render(HOSTILE)])


def test_the_last_guard_disarms_broadcasts_and_links_a_template_forgot_to_escape() -> None:
    forgotten = markup.Mrkdwn(f"{markup.mention('U0ALICE')} noted: <!channel> <https://evil.invalid|x> <#C0INC>")
    rendered = markup.render(forgotten)
    assert rendered == "<@U0ALICE> noted: &lt;!channel> &lt;https://evil.invalid|x> <#C0INC>"


def test_a_clipped_message_is_never_cut_inside_an_entity_or_a_mention() -> None:
    text = markup.format("{} {}", markup.mention("U0ALICE"), "<" * 50)
    for limit in range(5, 40):
        clipped = markup.clip(text, limit=limit)
        assert len(clipped) <= limit
        assert not clipped.rstrip("…").endswith(("&", "&l", "&lt", "<@U0A", "<@"))


def test_uploaded_markdown_keeps_its_formatting_but_no_broadcast() -> None:
    content = f"# Handoff\n- note: {HOSTILE}\n".encode()
    inert = markup.inert_file_text(content)
    assert b"<!channel>" not in inert and b"# Handoff" in inert and b"<http://evil.invalid" in inert
