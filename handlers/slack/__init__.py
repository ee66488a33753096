"""The Slack edge: one app builder, the `/triage` router, commands, actions and Block Kit."""
