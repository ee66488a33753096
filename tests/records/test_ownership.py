"""Ownership: roles, what each is told, and who may take restricted actions."""

from __future__ import annotations

import pytest

from bot.incidents.policy import PermissionRefused, parse_role, require_commander, role_expectations


@pytest.mark.parametrize(
    "text", ["commander", "Owner", "scribe", "observer", "owner:fabric", "owner:scheduler"]
)
def test_known_roles_are_accepted(text: str) -> None:
    assert parse_role(text=text) == text.lower()


@pytest.mark.parametrize("text", ["boss", "owner:network", "", "owner:"])
def test_unknown_roles_are_refused_with_the_choices(text: str) -> None:
    with pytest.raises(ValueError, match="owner:fabric"):
        parse_role(text=text)


def test_a_layer_owner_is_told_which_layer_is_theirs() -> None:
    text = role_expectations(role="owner:fabric", incident_key="INC-0007", target="slurm:4242")
    assert text.startswith("You are now owner:fabric on INC-0007 (slurm:4242).")
    assert "You own the fabric layer" in text and "rollback plan" in text


def test_the_commander_and_admins_may_resolve() -> None:
    require_commander(
        actor="U_CMD", commanders=["U_CMD"], admins=[], action="resolve", incident_key="INC-0001"
    )
    require_commander(
        actor="U_ADM", commanders=["U_CMD"], admins=["U_ADM"], action="resolve", incident_key="INC-0001"
    )


def test_anyone_else_is_refused_with_the_names_of_who_can() -> None:
    with pytest.raises(PermissionRefused) as refused:
        require_commander(
            actor="U_X", commanders=["U_CMD"], admins=["U_ADM"], action="reopen", incident_key="INC-0001"
        )
    assert str(refused.value) == "Only <@U_CMD> or an admin (<@U_ADM>) can reopen INC-0001."
