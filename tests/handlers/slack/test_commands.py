"""Parsing and routing of `/triage` text, before anything reaches Slack or the database."""

from __future__ import annotations

import pytest

from handlers.slack import router as commands
from handlers.slack.commands import incident as incident_subcommands
from handlers.slack.commands import registry
from tests.support.slack import shown

SUBCOMMANDS = registry()


@pytest.mark.parametrize(
    ("text", "name", "rest"),
    [
        ("job ml/x", "job", "ml/x"),
        ("  STATUS   mitigated ", "status", "mitigated"),
        ("", "help", ""),
        ("note INC-0003 saw  it", "note", "INC-0003 saw  it"),
    ],
)
def test_route_finds_the_subcommand_and_its_arguments(text: str, name: str, rest: str) -> None:
    subcommand, remainder, error = commands.route(subcommands=SUBCOMMANDS, text=text)
    assert error is None and subcommand is not None
    assert (subcommand.name, remainder) == (name, rest)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("jobs ml/x", "not a /triage subcommand"),
        ("status", "/triage status <"),
        ("status done", "/triage status <"),
        ("assign", "/triage assign @person"),
        ("assign <@U0BOB> chief", "not a role"),
        ("assign bob owner", "@ autocomplete"),
        ("note", "/triage note <"),
        ("note INC-0001", "/triage note <"),
        ("job ../etc", "Accepted forms"),
    ],
)
def test_route_explains_what_to_type_for_bad_input(text: str, hint: str) -> None:
    subcommand, _rest, error = commands.route(subcommands=SUBCOMMANDS, text=text)
    assert subcommand is None and error is not None
    assert hint in shown(error)


def test_assign_reads_escaped_mentions_with_or_without_a_name() -> None:
    assert incident_subcommands._parse_assign("<@U0BOB|bob> owner") == (None, "U0BOB", "owner")
    assert incident_subcommands._parse_assign("inc-0007 <@W0ANN> scribe") == ("INC-0007", "W0ANN", "scribe")


def test_the_fingerprint_is_stable_for_retries_and_differs_between_invocations() -> None:
    body = {"trigger_id": "1.2.abc", "text": "job ml/x"}
    assert commands.request_fingerprint(body) == commands.request_fingerprint(dict(body))
    assert commands.request_fingerprint(body) != commands.request_fingerprint(
        {**body, "trigger_id": "1.3.abc"}
    )
    without = {"team_id": "T", "channel_id": "C", "user_id": "U", "text": "job ml/x", "response_url": "u1"}
    assert commands.request_fingerprint(without) != commands.request_fingerprint(
        {**without, "response_url": "u2"}
    )
