"""The refusals the incident core raises; each message is safe to show a user and says what to do."""

from __future__ import annotations


class IncidentError(ValueError):
    """A request the lifecycle refuses; the message is safe to show a user and says what to do."""


class IncidentNotFound(IncidentError):
    """No incident matches the key or channel."""


class DuplicateRequest(IncidentError):
    """This Slack request was already handled (a retry, or another replica got it first)."""
