"""Renderers the Slack and terminal edges share (Markdown of a snapshot)."""
