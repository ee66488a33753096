"""Handoff and postmortem records: the data, how it is built and rendered, and the evidence bundle."""
