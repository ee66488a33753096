"""Free text lines (an event message, a log line, an scontrol field) classified through the same rules."""

from __future__ import annotations

import dataclasses
from typing import Any

from bot.diagnosis.classify import catalogue, engine, matching
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


def text_observation(*, text: str) -> findings.Observation:
    """Wrap a free line as an Observation of kind `text`, so one rule set serves both paths."""
    return findings.Observation(
        source="stdin", kind="text", subject="", text=text, command="", observed_at=findings.utcnow()
    )


def classify_line(text: str, *, rules: tuple[catalogue.Rule, ...] | None = None) -> LineResult:
    """The best rule for one line: most specific first, causes before symptoms in a tie."""
    active_rules = engine.load() if rules is None else rules
    observation = text_observation(text=text)
    matches = matching.best_matches(rules=active_rules, observation=observation)
    if not matches:
        return LineResult(layer=None, rule=None, scope=None, next="")
    best = matches[0]
    rule = best.rule
    scope = engine.derive_scope(rule=rule, observations=[observation]) if rule.scope_auto else rule.scope
    return LineResult(
        layer=rule.layer,
        rule=rule.id,
        scope=scope,
        next=engine.fill_placeholders(template=rule.next_step, observation=None),
        title=rule.title,
        also=tuple(match.rule.id for match in matches[1:]),
    )
