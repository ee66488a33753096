"""The HTTP paths the bot serves, named once for the server and the Slack manifest."""

EVENTS_PATH = "/slack/events"
ALERTS_PATH = "/alerts/alertmanager"
