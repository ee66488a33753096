"""The rulebook: roles, what each is told, who may take restricted actions, and who may read clusters."""

from __future__ import annotations

import pytest

from bot.incidents.policy import BOT_ACTOR, PermissionRefused, Policy, parse_role, role_expectations


@pytest.mark.parametrize("text", ["commander", "Owner", "scribe", "observer", "owner:fabric", "owner:scheduler"])
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
    policy = Policy(admins=frozenset({"U_ADM"}))
    policy.require_command(actor="U_CMD", commanders=["U_CMD"], action="resolve", incident_key="INC-0001")
    policy.require_command(actor="U_ADM", commanders=["U_CMD"], action="resolve", incident_key="INC-0001")


def test_anyone_else_is_refused_with_the_names_of_who_can() -> None:
    with pytest.raises(PermissionRefused) as refused:
        Policy(admins=frozenset({"U_ADM"})).require_command(
            actor="U_X", commanders=["U_CMD"], action="reopen", incident_key="INC-0001"
        )
    assert str(refused.value) == "Only the commander (<@U_CMD>) or an admin (<@U_ADM>) can reopen INC-0001."


def test_when_nobody_holds_command_restricted_actions_need_an_admin_and_command_can_be_taken() -> None:
    policy = Policy(admins=frozenset({"U_ADM"}))
    with pytest.raises(PermissionRefused, match="Nobody holds command"):
        policy.require_command(actor="U_X", commanders=[BOT_ACTOR], action="resolve", incident_key="INC-0002")
    policy.require_assign(actor="U_X", commanders=[], user_id="U_X", role="commander", incident_key="INC-0002")


def test_command_moves_only_by_the_commanders_or_an_admins_hand() -> None:
    policy = Policy(admins=frozenset({"U_ADM"}))
    with pytest.raises(PermissionRefused, match="hand over command"):
        policy.require_assign(actor="U_X", commanders=["U_CMD"], user_id="U_X", role="commander", incident_key="I")
    policy.require_assign(actor="U_CMD", commanders=["U_CMD"], user_id="U_X", role="commander", incident_key="I")
    policy.require_assign(actor="U_ADM", commanders=["U_CMD"], user_id="U_X", role="commander", incident_key="I")


def test_anyone_may_take_a_role_for_themselves_but_only_the_commander_assigns_others() -> None:
    policy = Policy()
    policy.require_assign(actor="U_X", commanders=["U_CMD"], user_id="U_X", role="owner", incident_key="I")
    with pytest.raises(PermissionRefused, match="make someone else owner"):
        policy.require_assign(actor="U_X", commanders=["U_CMD"], user_id="U_Y", role="owner", incident_key="I")
    policy.require_assign(actor="U_CMD", commanders=["U_CMD"], user_id="U_Y", role="owner:fabric", incident_key="I")


def test_the_allow_list_limits_cluster_reads_to_listed_users_and_the_bot() -> None:
    assert Policy().may_read_cluster("U_ANYONE")
    listed = Policy(snapshot_allowed=frozenset({"U_SRE"}))
    assert listed.may_read_cluster("U_SRE") and listed.may_read_cluster(BOT_ACTOR)
    assert not listed.may_read_cluster("U_X") and not listed.may_read_cluster("unknown")
    with pytest.raises(PermissionRefused, match="allow-list"):
        listed.require_cluster_read(actor="U_X")
