"""`/triage` subcommands, one module per family; `registry()` is the one table the router reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from handlers.slack.router import Subcommand


def registry() -> dict[str, Subcommand]:
    """Every subcommand, each defined exactly once, in the order `/triage help` lists them."""
    from handlers.slack.commands import compare, config, incident, records

    table: dict[str, Subcommand] = {}
    for family in (incident, compare, records, config):
        for subcommand in family.SUBCOMMANDS:
            if subcommand.name in table:
                raise RuntimeError(f"/triage {subcommand.name} is defined twice ({family.__name__})")
            table[subcommand.name] = subcommand
    return table
