"""Jinja2 text templates (handoff, postmortem, message snippets); a package so they ship in the wheel."""
