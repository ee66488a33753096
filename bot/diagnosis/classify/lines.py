"""Free text lines (an event message, a log line, an scontrol field) classified through the same rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from bot.diagnosis.classify import catalogue, engine, matching, prefilter
from bot.evidence import findings


@dataclasses.dataclass(frozen=True, kw_only=True)
class LineResult:
    """Per line: layer (None when no rule explains it), the rule, the scope and the next command."""

    layer: findings.Layer | None
    rule: str | None
    scope: findings.Scope | None
    next: str
    title: str = ""
    also: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; `layer` is null when unknown."""
        return findings._plain(self)


UNKNOWN = LineResult(layer=None, rule=None, scope=None, next="")
_MAX_REMEMBERED = 4096


def text_observation(*, text: str) -> findings.Observation:
    """Wrap a free line as an Observation of kind `text`, so one rule set serves both paths."""
    return findings.Observation(
        source="stdin", kind="text", subject="", text=text, command="", observed_at=findings.utcnow()
    )


def _result(*, matches: tuple[matching.Match, ...], observation: findings.Observation) -> LineResult:
    """The line's answer from its strongest matches (the first is the rule; the rest are `also`)."""
    if not matches:
        return UNKNOWN
    rule = matches[0].rule
    scope = engine.derive_scope(rule=rule, observations=[observation]) if rule.scope_auto else rule.scope
    return LineResult(
        layer=rule.layer,
        rule=rule.id,
        scope=scope,
        next=engine.fill_placeholders(template=rule.next_step, observation=None),
        title=rule.title,
        also=tuple(match.rule.id for match in matches[1:]),
    )


class _LinePlan:
    """Everything about a text line that does not depend on its words, worked out once per catalogue.

    A text observation has kind `text`, no fields and no subject, so which structured alternatives hold,
    each rule's derived scope and its next command are the same for every line; only the regexes differ.
    """

    def __init__(self, *, rules: tuple[catalogue.Rule, ...]) -> None:
        self.rules = rules
        self.rule_index = prefilter.for_rules(rules)
        self.index = self.rule_index.text
        template = text_observation(text="")
        self.on_fields = frozenset(
            number
            for number, rule in enumerate(rules)
            if matching.structured_match(rule=rule, observation=template)
        )
        self.template = template
        self.remembered: dict[frozenset[int], LineResult] = {}

    def answer(self, *, numbers: frozenset[int]) -> LineResult:
        """The LineResult for one set of matching rules (remembered: logs repeat the same few sets)."""
        result = self.remembered.get(numbers)
        if result is None:
            matches = tuple(
                matching.Match(
                    rule=self.rules[number],
                    observation=self.template,
                    matched_on=matching.MatchedOn.FIELDS if number in self.on_fields else matching.MatchedOn.TEXT,
                )
                for number in matching.strongest(rules=self.rules, index=self.rule_index, numbers=set(numbers))
            )
            result = _result(matches=matches, observation=self.template)
            if len(self.remembered) >= _MAX_REMEMBERED:
                self.remembered.clear()
            self.remembered[numbers] = result
        return result

    def classify(self, *, text: str) -> LineResult:
        """One line: the text regexes through the prefilter, plus the (constant) structured matches."""
        hits = self.index.hits(text=matching.window(text))
        if not hits and not self.on_fields:
            return UNKNOWN
        return self.answer(numbers=frozenset(hits) | self.on_fields)


_PLANS = prefilter.PerCatalogue(build=lambda rules: _LinePlan(rules=rules))


def _plan(rules: tuple[catalogue.Rule, ...]) -> _LinePlan:
    """The line plan of one rules tuple, worked out once."""
    return _PLANS.get(rules)


def classify_line(text: str, *, rules: tuple[catalogue.Rule, ...] | None = None) -> LineResult:
    """The best rule for one line: most specific first, causes before symptoms in a tie."""
    return _plan(engine.load() if rules is None else rules).classify(text=text)


def classify_lines(texts: Iterable[str], *, rules: tuple[catalogue.Rule, ...] | None = None) -> list[LineResult]:
    """`classify_line` for many lines, resolving the catalogue's plan once for the whole batch."""
    classify = _plan(engine.load() if rules is None else rules).classify
    return [classify(text=text) for text in texts]


def classify_line_plain(text: str, *, rules: tuple[catalogue.Rule, ...] | None = None) -> LineResult:
    """The unoptimised path (an Observation, every rule's whole regex): the reference tests compare with."""
    observation = text_observation(text=text)
    matches = matching.full_scan(rules=engine.load() if rules is None else rules, observation=observation)
    return _result(matches=matches, observation=observation)
