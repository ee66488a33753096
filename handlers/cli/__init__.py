"""The terminal edge: one module per `triage-bot` command, imported when that command runs."""
