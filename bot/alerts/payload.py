"""Alertmanager's webhook payload (version 4), validated strictly before anything is recorded.

https://prometheus.io/docs/alerting/latest/configuration/#webhook_config documents the shape. Everything in it
(labels, annotations, URLs) is untrusted text: bounded here, escaped wherever it becomes Slack text, and never
used to choose a file, a host or an argument.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

MAX_ALERTS = 2000
MAX_LABELS = 64
MAX_LABEL_VALUE = 1024
MAX_ANNOTATION = 8192
MAX_URL = 4096
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_FINGERPRINT = re.compile(r"[0-9a-f]{1,64}")
# Alertmanager sends the zero time as endsAt of alerts that have no end yet.
_ZERO_YEAR = 1


class MalformedNotification(ValueError):
    """The body is not an Alertmanager v4 notification; the message says what is wrong (never echoes it)."""


def _check_labels(value: dict[str, str], *, limit: int, what: str) -> dict[str, str]:
    if len(value) > MAX_LABELS:
        raise ValueError(f"more than {MAX_LABELS} {what}")
    for name, text in value.items():
        if not _LABEL_NAME.fullmatch(name):
            raise ValueError(f"{what} name is not a Prometheus label name")
        if len(text) > limit:
            raise ValueError(f"{what} value longer than {limit} characters")
    return value


def _check_url(value: str) -> str:
    if value and (len(value) > MAX_URL or not re.match(r"https?://", value)):
        raise ValueError("URL must be http(s) and at most 4096 characters")
    return value


# The bounds every label set, annotation set and URL of a notification is held to, wherever it appears.
Labels = Annotated[dict[str, str], AfterValidator(lambda value: _check_labels(value, limit=MAX_LABEL_VALUE, what="label"))]
Annotations = Annotated[
    dict[str, str], AfterValidator(lambda value: _check_labels(value, limit=MAX_ANNOTATION, what="annotation"))
]
Url = Annotated[str, AfterValidator(_check_url)]


class Alert(BaseModel):
    """One alert of a notification."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    status: Literal["firing", "resolved"]
    labels: Labels
    annotations: Annotations = Field(default_factory=dict)
    startsAt: datetime
    endsAt: datetime | None = None
    generatorURL: Url = ""
    fingerprint: str = ""

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("an alert has at least one label")
        return value

    @field_validator("fingerprint")
    @classmethod
    def _fingerprint(cls, value: str) -> str:
        if value and not _FINGERPRINT.fullmatch(value):
            raise ValueError("fingerprint is not hexadecimal")
        return value

    @field_validator("startsAt", "endsAt")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    @property
    def name(self) -> str:
        """The `alertname` label (Alertmanager always sets one)."""
        return self.labels.get("alertname", "unnamed")

    @property
    def identity(self) -> str:
        """Alertmanager's fingerprint of the label set, or the same idea computed here."""
        if self.fingerprint:
            return self.fingerprint
        canonical = json.dumps(sorted(self.labels.items()), separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def ended_at(self) -> datetime | None:
        """When it ended (None while firing: Alertmanager sends the zero time)."""
        if self.endsAt is None or self.endsAt.year == _ZERO_YEAR:
            return None
        return self.endsAt


class Notification(BaseModel):
    """One webhook call: a group of alerts sharing `groupKey`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    version: Literal["4"]
    groupKey: Annotated[str, Field(max_length=4096)]
    truncatedAlerts: int = Field(default=0, ge=0)
    status: Literal["firing", "resolved"]
    receiver: Annotated[str, Field(max_length=256)]
    groupLabels: Labels = Field(default_factory=dict)
    commonLabels: Labels = Field(default_factory=dict)
    commonAnnotations: Annotations = Field(default_factory=dict)
    externalURL: Url = ""
    alerts: Annotated[list[Alert], Field(min_length=1, max_length=MAX_ALERTS)]


def parse_notification(body: bytes) -> Notification:
    """Validate one webhook body; MalformedNotification says which field is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise MalformedNotification("the body is not JSON") from None
    if not isinstance(data, dict):
        raise MalformedNotification("the body is not a JSON object")
    if data.get("version") != "4":
        raise MalformedNotification('not an Alertmanager webhook payload of version "4"')
    try:
        return Notification.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))[:120]
        raise MalformedNotification(f"{where or 'payload'}: {first.get('msg', 'invalid')}"[:300]) from None
