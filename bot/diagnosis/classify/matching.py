"""Does one rule match one observation? Structured fields first, regex on the text second."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from bot.diagnosis.classify import catalogue, prefilter
from bot.evidence import findings

# Field values that carry human text worth searching alongside `Observation.text`.
TEXT_FIELDS = ("message", "error", "reason", "text", "status", "state", "note", "detail")


class MatchedOn(enum.StrEnum):
    """How the rule matched: structured fields are stronger evidence than a regex on text."""

    FIELDS = "fields"
    TEXT = "text"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Match:
    """One rule that matched one observation, and how."""

    rule: catalogue.Rule
    observation: findings.Observation
    matched_on: MatchedOn

    @property
    def confidence(self) -> float:
        """Rule confidence, a little higher when structured fields agreed."""
        bonus = 0.05 if self.matched_on is MatchedOn.FIELDS else 0.0
        return min(1.0, self.rule.confidence + bonus)


# Regex rules read a bounded window, so one pathological multi-megabyte line cannot stall a snapshot:
# the head (where messages state their error) and the tail (where stack traces end). Fields are never cut.
MATCH_HEAD_CHARS = 6144
MATCH_TAIL_CHARS = 2048


def window(text: str) -> str:
    """The bounded head and tail of a line that regex rules read (the whole line when it is short)."""
    if len(text) <= MATCH_HEAD_CHARS + MATCH_TAIL_CHARS:
        return text
    return f"{text[:MATCH_HEAD_CHARS]} … {text[-MATCH_TAIL_CHARS:]}"


_window = window


def searchable_text(*, observation: findings.Observation) -> str:
    """The observation's line plus any textual field values, for regex rules (bounded window)."""
    parts = [observation.text]
    for name in TEXT_FIELDS:
        value = observation.fields.get(name)
        if isinstance(value, str) and value and value not in observation.text:
            parts.append(value)
    return _window(" | ".join(part for part in parts if part))


def _as_number(value: Any) -> float | None:
    """Numbers from YAML or collectors, tolerating strings like '12' or '0.4'."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _comparison_holds(*, operator: str, actual: Any, expected: Any, fields: dict[str, Any]) -> bool:
    """Evaluate one `{lt: 5}` style comparison (`lt_field` compares with another field)."""
    if operator == "present":
        return (actual not in (None, "", [], {})) == bool(expected)
    if operator == "ne":
        return actual is not None and str(actual).lower() != str(expected).lower()
    if operator == "lt_field":
        expected = fields.get(str(expected))
        operator = "lt"
    left, right = _as_number(actual), _as_number(expected)
    if left is None or right is None:
        return False
    return {
        "lt": left < right,
        "le": left <= right,
        "gt": left > right,
        "ge": left >= right,
    }[operator]


def _condition_holds(*, condition: catalogue.FieldCondition, fields: dict[str, Any]) -> bool:
    """All parts of one field condition must hold for the observation's value."""
    actual = fields.get(condition.name)
    if condition.values and (actual is None or str(actual).lower() not in condition.values):
        return False
    for operator, expected in condition.comparisons:
        if not _comparison_holds(operator=operator, actual=actual, expected=expected, fields=fields):
            return False
    return condition.pattern is None or (actual is not None and bool(condition.pattern.search(str(actual))))


def _structured_holds(*, alternative: catalogue.Structured, observation: findings.Observation) -> bool:
    if alternative.kinds and observation.kind not in alternative.kinds:
        return False
    return all(_condition_holds(condition=item, fields=observation.fields) for item in alternative.fields)


def structured_match(*, rule: catalogue.Rule, observation: findings.Observation) -> bool:
    """Whether any of the rule's structured alternatives (kind and fields) holds for the observation."""
    return any(_structured_holds(alternative=item, observation=observation) for item in rule.structured)


def match_rule(
    *, rule: catalogue.Rule, observation: findings.Observation, text: str | None = None
) -> Match | None:
    """Structured match when any alternative's kind and fields agree; otherwise the text regex."""
    if any(_structured_holds(alternative=item, observation=observation) for item in rule.structured):
        return Match(rule=rule, observation=observation, matched_on=MatchedOn.FIELDS)
    if rule.text is not None:
        haystack = searchable_text(observation=observation) if text is None else text
        if rule.text_matches(haystack):
            return Match(rule=rule, observation=observation, matched_on=MatchedOn.TEXT)
    return None


def _strongest(matches: list[Match]) -> tuple[Match, ...]:
    """The highest-priority match picks the layer; that layer's specific matches stay (fallbacks if none)."""
    if not matches:
        return ()
    matches.sort(key=lambda item: (-item.rule.priority, item.rule.is_symptom, item.rule.id))
    layer = matches[0].rule.layer
    same_layer = [match for match in matches if match.rule.layer is layer]
    specific = [match for match in same_layer if not match.rule.fallback]
    return tuple(specific or same_layer)


def best_matches(
    *, rules: tuple[catalogue.Rule, ...], observation: findings.Observation
) -> tuple[Match, ...]:
    """The strongest layer's matches for one observation.

    The highest-priority match picks the layer (the most specific evidence wins: a TensorRT
    serialization error outranks a generic exit code); other matches in that same layer stay, so a
    FailedScheduling message naming both capacity and taints yields both findings. `fallback` rules
    (the un-itemised catch-alls) only stand when nothing more specific in their layer matched.
    Rules are found through `prefilter` (structured rules by kind, regexes by their literals): the same
    answer as `full_scan`, which tests compare it with.
    """
    index = prefilter.for_rules(rules)
    on_fields = {
        number
        for number in index.structured_candidates(kind=observation.kind)
        if structured_match(rule=rules[number], observation=observation)
    }
    numbers = on_fields | index.text.hits(text=searchable_text(observation=observation))
    return tuple(
        Match(
            rule=rules[number],
            observation=observation,
            matched_on=MatchedOn.FIELDS if number in on_fields else MatchedOn.TEXT,
        )
        for number in strongest(rules=rules, index=index, numbers=numbers)
    )


def strongest(*, rules: tuple[catalogue.Rule, ...], index: prefilter.RuleIndex, numbers: set[int]) -> list[int]:
    """`_strongest` on rule numbers, so only the matches that stand are ever built."""
    if not numbers:
        return []
    ordered = sorted(numbers, key=index.order.__getitem__)
    layer = rules[ordered[0]].layer
    same_layer = [number for number in ordered if rules[number].layer is layer]
    return [number for number in same_layer if not rules[number].fallback] or same_layer


def full_scan(*, rules: tuple[catalogue.Rule, ...], observation: findings.Observation) -> tuple[Match, ...]:
    """`best_matches` the plain way (every rule, every whole regex): the reference the prefilter is tested on."""
    text = searchable_text(observation=observation)
    return _strongest(
        [match for rule in rules if (match := match_rule(rule=rule, observation=observation, text=text))]
    )
