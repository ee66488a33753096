"""Who may do what on an incident, and what each role is expected to do."""

from __future__ import annotations

from collections.abc import Iterable

from bot.evidence.findings import Layer

BASE_ROLES = ("commander", "owner", "scribe", "observer")
RESTRICTED_ACTIONS = ("resolve", "reopen", "change severity", "reassign commander")

_EXPECTATIONS = {
    "commander": "You run this incident: keep one person per role, decide on changes (one lever at a time), "
    "post updates at the severity's interval, and resolve only when the original failure no longer reproduces.",
    "owner": "You own the diagnosis and the fix: confirm the failing layer with evidence (command, output, "
    "timestamp, expected vs observed), propose changes with a rollback plan, and post updates in the thread.",
    "scribe": "You keep the record: note decisions and their reasons in the thread (`/triage note ...`, "
    "`/triage note root cause: ...`) so the handoff and postmortem are complete.",
    "observer": "You follow along: no action is expected unless the commander asks.",
}


class PermissionRefused(PermissionError):
    """The caller may not do this; the message names who can."""


def parse_role(*, text: str) -> str:
    """`commander`, `owner`, `scribe`, `observer` or a layer owner such as `owner:fabric`."""
    role = (text or "").strip().lower()
    if role in BASE_ROLES:
        return role
    prefix, _, layer = role.partition(":")
    if prefix == "owner" and layer in {item.value for item in Layer}:
        return role
    layers = ", ".join(f"owner:{item.value}" for item in Layer)
    raise ValueError(
        f"Unknown role {text!r}: use one of {', '.join(BASE_ROLES)}, or a layer owner ({layers})."
    )


def role_expectations(*, role: str, incident_key: str, target: str) -> str:
    """The direct message an assignee gets: what the role means on this incident."""
    base, _, layer = role.partition(":")
    duty = _EXPECTATIONS.get(base, _EXPECTATIONS["observer"])
    if layer:
        duty = f"You own the {layer} layer: " + duty[0].lower() + duty[1:]
    return f"You are now {role} on {incident_key} ({target}). {duty}"


def require_commander(
    *, actor: str, commanders: Iterable[str], admins: Iterable[str], action: str, incident_key: str
) -> None:
    """Only the incident's commander or a configured admin may take restricted actions."""
    commander_ids = [item for item in commanders if item]
    if actor in commander_ids or actor in set(admins):
        return
    who = " or ".join(f"<@{item}>" for item in commander_ids) or "the commander (none assigned yet)"
    admin_ids = sorted(set(admins))
    if admin_ids:
        who += " or an admin (" + ", ".join(f"<@{item}>" for item in admin_ids) + ")"
    raise PermissionRefused(f"Only {who} can {action} {incident_key}.")
