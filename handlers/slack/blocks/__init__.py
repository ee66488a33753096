"""Block Kit builders and Slack's limits, checked in one place."""
