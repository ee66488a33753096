"""Who may do what on an incident: the one rulebook the core enforces and the edges ask before they act.

Rules (SECURITY.md states them with the tests that prove them):
- Command (commander role): handed over only by the current commander or an admin; when nobody holds
  command, anyone may take it.
- Moving the incident (status, resolve, reopen, severity): the commander or an admin.
- Other roles (owner, scribe, observer, owner:<layer>): the commander or an admin assigns anyone; anyone
  may take a role for themselves.
- Cluster reads (snapshots, re-runs, comparisons, probes, scheduled re-validation), and setting a channel's
  default cluster (which steers them): with an allow-list configured, only listed users and the bot's own
  identity (alert intake); everyone otherwise.
- Notes, changes, measurements, handoffs, postmortems and prevention: anyone on the incident.
- Where: an incident is worked on in its own channel; a key typed in another channel reads and changes
  nothing there, and `/triage list` shows the channel's own incidents (admins see and act everywhere).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from bot import markup
from bot.evidence.findings import Layer
from bot.incidents.errors import IncidentError

BOT_ACTOR = "triage-bot"
COMMANDER = "commander"
BASE_ROLES = ("commander", "owner", "scribe", "observer")
MULTI_HOLDER_ROLES = frozenset({"owner", "observer"})

_EXPECTATIONS = {
    "commander": "You run this incident: keep one person per role, decide on changes (one lever at a time), "
    "post updates at the severity's interval, and resolve only when the original failure no longer reproduces.",
    "owner": "You own the diagnosis and the fix: confirm the failing layer with evidence (command, output, "
    "timestamp, expected vs observed), propose changes with a rollback plan, and post updates in the thread.",
    "scribe": "You keep the record: note decisions and their reasons in the thread (`/triage note ...`, "
    "`/triage note root cause: ...`) so the handoff and postmortem are complete.",
    "observer": "You follow along: no action is expected unless the commander asks.",
}


class PolicyError(IncidentError):
    """A request the rulebook refuses; the message is safe to show a user and says what to do."""


class PermissionRefused(PolicyError):
    """The caller may not do this; the message names who can."""


class InvalidRole(PolicyError):
    """Not a role the bot knows."""


def parse_role(*, text: str) -> str:
    """`commander`, `owner`, `scribe`, `observer` or a layer owner such as `owner:fabric`."""
    role = (text or "").strip().lower()
    if role in BASE_ROLES:
        return role
    prefix, _, layer = role.partition(":")
    if prefix == "owner" and layer in {item.value for item in Layer}:
        return role
    layers = ", ".join(f"owner:{item.value}" for item in Layer)
    shown = "".join(ch for ch in role[:30] if ch.isprintable() and ch not in "`<>&")
    raise InvalidRole(f"`{shown}` is not a role. Roles: {', '.join(BASE_ROLES)}, or a layer owner ({layers}).")


def role_expectations(*, role: str, incident_key: str, target: str) -> str:
    """The direct message an assignee gets: what the role means on this incident."""
    base, _, layer = role.partition(":")
    duty = _EXPECTATIONS.get(base, _EXPECTATIONS["observer"])
    if layer:
        duty = f"You own the {layer} layer: " + duty[0].lower() + duty[1:]
    return f"You are now {role} on {incident_key} ({target}). {duty}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Policy:
    """The rulebook for one deployment: its admins and its snapshot allow-list (empty: everyone)."""

    admins: frozenset[str] = frozenset()
    snapshot_allowed: frozenset[str] = frozenset()

    def is_admin(self, actor: str) -> bool:
        """A configured admin (TRIAGE_ADMIN_USER_IDS)."""
        return actor in self.admins

    def may_read_cluster(self, actor: str) -> bool:
        """Whether `actor` may cause cluster reads (snapshot, re-run, compare, probe, re-validation)."""
        return not self.snapshot_allowed or actor in self.snapshot_allowed or actor == BOT_ACTOR

    def require_cluster_read(self, *, actor: str, what: str = "take snapshots") -> None:
        """Refuse cluster reads for users off the allow-list, saying why and what to do."""
        if self.may_read_cluster(actor):
            return
        raise PermissionRefused(
            f"Only the {len(self.snapshot_allowed)} responder(s) on this workspace's snapshot allow-list may "
            f"{what}, and <@{actor}> is not on it. Ask an on-call responder."
        )

    def may_see(self, *, actor: str, incident_channel: str, from_channel: str) -> bool:
        """An incident is visible from its own channel, or to an admin."""
        return incident_channel == from_channel or self.is_admin(actor)

    def require_same_channel(self, *, actor: str, incident_key: str, incident_channel: str, from_channel: str) -> None:
        """Refuse a command that names another channel's incident: it may be private, and its thread is the
        place to work on it."""
        if self.may_see(actor=actor, incident_channel=incident_channel, from_channel=from_channel):
            return
        raise PermissionRefused(
            markup.format(
                "{} is worked on in its own channel ({}); run the command there.",
                incident_key,
                markup.channel(incident_channel),
            )
        )

    def may_command(self, *, actor: str, commanders: Iterable[str]) -> bool:
        """The commander or an admin."""
        return actor in set(commanders) or self.is_admin(actor)

    def require_command(self, *, actor: str, commanders: Iterable[str], action: str, incident_key: str) -> None:
        """Commander-or-admin actions: moving the incident along, resolving, reopening, severity."""
        holders = [item for item in commanders if item and item != BOT_ACTOR]
        if self.may_command(actor=actor, commanders=holders):
            return
        who = "the commander" + (" (" + ", ".join(f"<@{item}>" for item in holders) + ")" if holders else "")
        admin_ids = sorted(self.admins)
        if admin_ids:
            who += " or an admin (" + ", ".join(f"<@{item}>" for item in admin_ids) + ")"
        hint = (
            "" if holders else f" Nobody holds command: take it with `/triage assign {incident_key} @you commander`."
        )
        raise PermissionRefused(f"Only {who} can {action} {incident_key}.{hint}")

    def require_assign(
        self, *, actor: str, commanders: Iterable[str], user_id: str, role: str, incident_key: str
    ) -> None:
        """Command moves by the commander's (or an admin's) hand, or is taken when free; other roles are
        assigned by the commander or an admin, or taken by anyone for themselves."""
        holders = [item for item in commanders if item and item != BOT_ACTOR]
        if role == COMMANDER:
            if holders:
                self.require_command(
                    actor=actor, commanders=holders, action="hand over command of", incident_key=incident_key
                )
            return
        if actor == user_id or not holders:
            return
        self.require_command(
            actor=actor, commanders=holders, action=f"make someone else {role} of", incident_key=incident_key
        )
