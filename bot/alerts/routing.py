"""Routing rules as data: which alerts open incidents, in which channel, at which severity; the rest are recorded.

The rules live in a YAML file (TRIAGE_ALERTS_RULES; the Helm chart renders its values into a ConfigMap):

    channel: C0GPUOPS              # default Slack channel id for rules that open incidents
    storm_guard: {max_new_incidents: 20, window_minutes: 10}
    rules:
      - name: gpu-hardware
        match: {alertname: DCGMXidErrors}        # label equals value
        match_re: {severity: "critical|page"}    # label fully matches the regular expression
        action: open                             # open | record (default record)
        severity: critical                       # the incident's initial severity
        target: node                             # auto | workload | node (what the alert is about)
        node_platform: kubernetes                # kubernetes | slurm (for node targets)

The first rule that matches decides; an alert no rule matches is only recorded.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

_CHANNEL = re.compile(r"[CDG][A-Z0-9]{2,30}")


def _valid_channel(value: str | None) -> str | None:
    if value is not None and not _CHANNEL.fullmatch(value):
        raise ValueError("channel must be a Slack channel id such as C0123ABCD (not a #name)")
    return value


class RulesError(ValueError):
    """The rules file cannot be used; the message names the file and the problem."""


class Rule(BaseModel):
    """One routing rule."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    match: dict[str, str] = Field(default_factory=dict)
    match_re: dict[str, str] = Field(default_factory=dict)
    action: Literal["open", "record"] = "record"
    channel: str | None = None
    severity: Literal["critical", "high", "medium", "low", "info"] | None = None
    target: Literal["auto", "workload", "node"] = "auto"
    node_platform: Literal["kubernetes", "slurm"] = "kubernetes"

    @field_validator("channel")
    @classmethod
    def _channel(cls, value: str | None) -> str | None:
        return _valid_channel(value)

    @field_validator("match_re")
    @classmethod
    def _patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for label, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"match_re.{label} is not a regular expression: {error}") from None
        return value

    def matches(self, labels: dict[str, str]) -> bool:
        """Every `match` label equal and every `match_re` label fully matched (a missing label is empty)."""
        return all(labels.get(key) == value for key, value in self.match.items()) and all(
            re.fullmatch(pattern, labels.get(key, "")) for key, pattern in self.match_re.items())


class StormGuard(BaseModel):
    """At most this many new incidents from alerts per window, whatever the rules say."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_new_incidents: int = Field(default=20, ge=1, le=1000)
    window_minutes: float = Field(default=10, gt=0, le=1440)


class RoutingRules(BaseModel):
    """The whole rules file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str | None = None
    storm_guard: StormGuard = Field(default_factory=StormGuard)
    rules: list[Rule] = Field(default_factory=list)

    @field_validator("channel")
    @classmethod
    def _channel(cls, value: str | None) -> str | None:
        return _valid_channel(value)

    @model_validator(mode="after")
    def _opening_rules_have_a_channel(self) -> RoutingRules:
        names = [rule.name for rule in self.rules]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"rule names must be unique: {', '.join(duplicated)}")
        homeless = [rule.name for rule in self.rules if rule.action == "open" and not (rule.channel or self.channel)]
        if homeless:
            raise ValueError(f"rules {', '.join(homeless)} open incidents but name no channel (and there is no "
                             "default `channel`)")
        return self


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decision:
    """What to do with one alert."""

    rule: str
    action: str
    channel: str | None = None
    severity: str | None = None
    target: str = "auto"
    node_platform: str = "kubernetes"

    @property
    def opens(self) -> bool:
        """Whether a firing alert under this decision opens (or links) an incident."""
        return self.action == "open"


RECORD_ONLY = Decision(rule="(no rule matched)", action="record")


def decide(rules: RoutingRules, labels: dict[str, str]) -> Decision:
    """The first matching rule's decision; record-only when none matches."""
    for rule in rules.rules:
        if rule.matches(labels):
            return Decision(rule=rule.name, action=rule.action, channel=rule.channel or rules.channel,
                            severity=rule.severity, target=rule.target, node_platform=rule.node_platform)
    return RECORD_ONLY


def load_rules(path: Path | None) -> RoutingRules:
    """The rules at `path`; no path means no rules (every alert recorded, none opens an incident)."""
    if path is None:
        return RoutingRules()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise RulesError(f"cannot read alert routing rules {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise RulesError(f"alert routing rules {path} are not YAML: {error}"[:500]) from None
    try:
        return RoutingRules.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        raise RulesError(f"alert routing rules {path}: {where or 'file'}: {first.get('msg')}"[:500]) from None
