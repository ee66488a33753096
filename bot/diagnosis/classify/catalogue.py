"""The rule catalogue: loads rules.yaml once, validates every rule, and keeps the data typed."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import yaml

from bot.evidence import findings

ROLES = ("cause", "symptom")
COMPARISONS = ("lt", "le", "gt", "ge", "ne", "re", "present", "lt_field")


class CatalogueError(ValueError):
    """The rule catalogue is malformed; the message names the rule and the field."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class FieldCondition:
    """One structured condition on an observation field: allowed values, a comparison or a regex."""

    name: str
    values: tuple[str, ...] = ()
    comparisons: tuple[tuple[str, Any], ...] = ()
    pattern: re.Pattern[str] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Structured:
    """One structured alternative: the observation kinds it applies to and conditions that must all hold."""

    kinds: tuple[str, ...]
    fields: tuple[FieldCondition, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """One catalogue entry: where it looks, what layer it means, what proves it, what to run next."""

    id: str
    layer: findings.Layer
    title: str
    role: str
    category: str
    priority: int
    confidence: float
    severity: findings.Severity
    scope: findings.Scope | None
    scope_auto: bool
    structured: tuple[Structured, ...]
    text: re.Pattern[str] | None
    cites: str
    expected: str
    next_step: str
    explained_by: tuple[findings.Layer, ...]
    integrity: bool
    fallback: bool = False
    # A line the text regex matches is still not this rule's when `unless` matches it too (the guide gives
    # such lines another layer). Kept apart from `text` so the prefilter can gate `text` by its literals.
    unless: re.Pattern[str] | None = None
    # The guide's decided phrases (decided.yaml) that give a line another layer (or none): they veto a text
    # match like `unless`. The prefilter finds them by their literals once per line, not once per rule.
    decided: tuple[re.Pattern[str], ...] = ()

    def text_matches(self, text: str) -> bool:
        """The text regex finds a match in `text`, and neither `unless` nor a decided phrase does."""
        return (self.text is not None and self.text.search(text) is not None
                and (self.unless is None or self.unless.search(text) is None)
                and not any(phrase.search(text) for phrase in self.decided))

    @property
    def is_symptom(self) -> bool:
        """Symptoms are downstream signals that a cause in another finding may explain."""
        return self.role == "symptom"


def _compile(*, rule_id: str, pattern: str) -> re.Pattern[str]:
    """Compile a rule regex case-insensitively, naming the rule when it is invalid."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as error:
        raise CatalogueError(f"rule {rule_id}: invalid regex {pattern!r}: {error}") from error


def _field_condition(*, rule_id: str, name: str, spec: Any) -> FieldCondition:
    """Parse `name: [values]`, `name: value` or `name: {lt: 5, re: ...}`."""
    if isinstance(spec, Mapping):
        unknown = set(spec) - set(COMPARISONS)
        if unknown:
            raise CatalogueError(f"rule {rule_id}: field {name}: unknown comparison {sorted(unknown)}")
        pattern = _compile(rule_id=rule_id, pattern=str(spec["re"])) if "re" in spec else None
        comparisons = tuple((key, value) for key, value in spec.items() if key != "re")
        return FieldCondition(name=name, comparisons=comparisons, pattern=pattern)
    values = spec if isinstance(spec, list) else [spec]
    return FieldCondition(name=name, values=tuple(str(value).lower() for value in values))


def _structured(*, rule_id: str, raw: Mapping[str, Any]) -> Structured:
    """One `{kind: [...], fields: {...}}` alternative."""
    specs = raw.get("fields") or {}
    if not specs:
        raise CatalogueError(f"rule {rule_id}: a structured alternative needs fields")
    kinds = raw.get("kind") or []
    return Structured(
        kinds=tuple(str(kind) for kind in (kinds if isinstance(kinds, list) else [kinds])),
        fields=tuple(
            _field_condition(rule_id=rule_id, name=str(name), spec=spec) for name, spec in specs.items()
        ),
    )


def _rule(raw: Mapping[str, Any]) -> Rule:
    """Validate and type one YAML mapping."""
    rule_id = str(raw.get("id", "")).strip()
    if not rule_id:
        raise CatalogueError(f"a rule has no id: {dict(raw)!r}")
    required = ("layer", "title", "severity", "cites", "next")
    missing = [key for key in required if not raw.get(key)]
    if missing:
        raise CatalogueError(f"rule {rule_id}: missing {missing}")
    role = str(raw.get("role", "cause"))
    if role not in ROLES:
        raise CatalogueError(f"rule {rule_id}: role must be one of {ROLES}, not {role!r}")
    match = raw.get("match") or {}
    alternatives = list(match.get("any") or [])
    if match.get("fields"):
        alternatives.insert(0, {"kind": match.get("kind"), "fields": match["fields"]})
    structured = tuple(_structured(rule_id=rule_id, raw=item) for item in alternatives)
    text = match.get("text")
    if not structured and not text:
        raise CatalogueError(f"rule {rule_id}: match needs fields or text")
    unless = match.get("unless")
    if unless and not text:
        raise CatalogueError(f"rule {rule_id}: `unless` narrows a text match; the rule has no text")
    scope_raw = raw.get("scope")
    try:
        layer = findings.Layer(raw["layer"])
        severity = findings.Severity(raw["severity"])
        scope = None if scope_raw in (None, "auto") else findings.Scope(scope_raw)
        explained_by = tuple(findings.Layer(item) for item in raw.get("explained_by", []) or [])
    except ValueError as error:
        raise CatalogueError(f"rule {rule_id}: {error}") from error
    confidence = float(raw.get("confidence", 0.8))
    if not 0.0 < confidence <= 1.0:
        raise CatalogueError(f"rule {rule_id}: confidence must be in (0, 1]")
    if role == "symptom" and not explained_by:
        raise CatalogueError(f"rule {rule_id}: a symptom must say which layers can explain it")
    return Rule(
        id=rule_id,
        layer=layer,
        title=str(raw["title"]),
        role=role,
        category=str(raw.get("category", "")),
        priority=int(raw.get("priority", 50)),
        confidence=confidence,
        severity=severity,
        scope=scope,
        scope_auto=scope_raw == "auto",
        structured=structured,
        text=_compile(rule_id=rule_id, pattern=str(text)) if text else None,
        cites=str(raw["cites"]).strip(),
        expected=str(raw.get("expected", "")).strip(),
        next_step=str(raw["next"]).strip(),
        explained_by=explained_by,
        integrity=bool(raw.get("integrity", False)),
        fallback=bool(raw.get("fallback", False)),
        unless=_compile(rule_id=rule_id, pattern=str(unless)) if unless else None,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decided:
    """A phrase the labelling guide decides by itself: a line holding it belongs to `layer` (None: to no
    layer), so no rule of another layer may claim it by its text."""

    phrase: re.Pattern[str]
    layer: findings.Layer | None
    guide: str


def _decided(raw: Mapping[str, Any]) -> Decided:
    """Validate and type one decided phrase."""
    phrase = str(raw.get("phrase", "")).strip()
    guide = str(raw.get("guide", "")).strip()
    if not phrase or not guide:
        raise CatalogueError(f"a decided phrase needs `phrase` and `guide` (the guide's sentence): {dict(raw)!r}")
    if "layer" not in raw:
        raise CatalogueError(f"decided phrase {phrase!r}: say its layer (null when the guide abstains)")
    try:
        layer = None if raw["layer"] is None else findings.Layer(raw["layer"])
    except ValueError as error:
        raise CatalogueError(f"decided phrase {phrase!r}: {error}") from error
    return Decided(phrase=_compile(rule_id=f"decided {phrase!r}", pattern=phrase), layer=layer, guide=guide)


def _veto_decided(*, rule: Rule, decided: Sequence[Decided]) -> Rule:
    """The rule, vetoed by every decided phrase that gives its lines another layer (or none)."""
    others = tuple(item.phrase for item in decided if item.layer is not rule.layer)
    if rule.text is None or not others:
        return rule
    return dataclasses.replace(rule, decided=others)


def parse_rules(
    *, documents: Sequence[Mapping[str, Any]], decided: Sequence[Mapping[str, Any]] = ()
) -> tuple[Rule, ...]:
    """Turn the YAML list into rules (ids unique), each vetoed on the lines a decided phrase gives elsewhere."""
    phrases = tuple(_decided(raw) for raw in decided)
    rules = tuple(_veto_decided(rule=_rule(raw), decided=phrases) for raw in documents)
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise CatalogueError(f"duplicate rule id {rule.id}")
        seen.add(rule.id)
    return rules


def _packaged(name: str) -> Any:
    text = resources.files("bot.diagnosis.classify").joinpath(name).read_text(encoding="utf-8")
    # LibYAML's safe loader when PyYAML was built with it: the pure-Python parser spent most of a
    # terminal command's start-up on this file.
    documents = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(documents, list):
        raise CatalogueError(f"{name} must be a list")
    return documents


@functools.cache
def load_decided() -> tuple[Decided, ...]:
    """The packaged decided phrases (decided.yaml), for the rules document."""
    return tuple(_decided(raw) for raw in _packaged("decided.yaml"))


@functools.cache
def load_rules() -> tuple[Rule, ...]:
    """The packaged catalogue with its decided phrases, parsed once per process (it is immutable data)."""
    return parse_rules(documents=_packaged("rules.yaml"), decided=_packaged("decided.yaml"))
