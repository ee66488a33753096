"""Writes docs/rules.md from the catalogue, so the documentation cannot drift: `python -m bot.diagnosis.classify.docs`."""

from __future__ import annotations

import sys

from bot.diagnosis.classify import catalogue
from bot.evidence import findings

HEADER = """# Classification rules

Generated from `bot/diagnosis/classify/rules.yaml` and `decided.yaml` by `python -m bot.diagnosis.classify.docs > docs/rules.md`; do not edit by hand
(a test fails when this file and the catalogue disagree).

Each rule matches structured fields first (observation kind, reason, exit code, condition) and a
case-insensitive regex on the text second. When several rules match one observation, the highest
priority picks the layer; `fallback` rules stand only when nothing more specific in their layer matched.
A **symptom** never becomes a second verdict: it is reported `caused_by` the strongest cause in a layer
that can explain it. Evidence no rule explains gives `layer: null` and is listed as unexplained.
Verdict confidence at or above {confident} is "confident". Regex rules read the first {head} and the last
{tail} characters of a text (one pathological line cannot stall a snapshot); structured fields are read whole.

Layers: scheduler (admission, placement, queueing), runtime (containers, processes, nodes, GPUs),
workflow (conversion artifacts, serving routes, benchmarks), fabric (collectives, RDMA/IB, NVLink,
network and parallel filesystems). Scopes: node-local, path-local, fabric-wide, workload.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _fields(rule: catalogue.Rule) -> str:
    alternatives = []
    for alternative in rule.structured:
        parts = []
        if alternative.kinds:
            parts.append("kind in " + ", ".join(f"`{kind}`" for kind in alternative.kinds))
        for condition in alternative.fields:
            if condition.values:
                parts.append(f"`{condition.name}` in " + ", ".join(condition.values))
            for operator, value in condition.comparisons:
                parts.append(f"`{condition.name}` {operator} {value}")
            if condition.pattern is not None:
                parts.append(f"`{condition.name}` ~ `{condition.pattern.pattern}`")
        alternatives.append(" and ".join(parts))
    return " **or** ".join(alternatives) or "(text only)"


def _decided_section(decided: tuple[catalogue.Decided, ...]) -> list[str]:
    lines = [
        "## Decided by the labelling guide",
        "",
        "A line holding one of these phrases belongs to the layer given (none: no layer), whatever tool prints",
        "it: every rule of another layer is vetoed on it (`bot/diagnosis/classify/decided.yaml`).",
        "",
        "| phrase | layer | the guide |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{_cell(item.phrase.pattern)}` | {item.layer.value if item.layer else 'none'} | {_cell(item.guide)} |"
        for item in decided
    ]
    return [*lines, ""]


def _rule_section(rule: catalogue.Rule) -> list[str]:
    scope = (
        "auto (from how many hosts/paths the evidence names)"
        if rule.scope_auto
        else (rule.scope.value if rule.scope else "none")
    )
    role = rule.role + (
        f", explained by {', '.join(layer.value for layer in rule.explained_by)}" if rule.is_symptom else ""
    )
    lines = [
        f"### `{rule.id}`",
        "",
        f"{rule.title}.",
        "",
        "| | |",
        "|---|---|",
        f"| category | {rule.category or '-'} |",
        f"| role | {role}{' (fallback)' if rule.fallback else ''} |",
        f"| severity | {rule.severity.value}{' (hardware integrity first)' if rule.integrity else ''} |",
        f"| priority / confidence | {rule.priority} / {rule.confidence:.2f} |",
        f"| scope | {scope} |",
        f"| structured match | {_cell(_fields(rule))} |",
        f"| text match | `{_cell(rule.text.pattern)}` |"
        if rule.text is not None
        else "| text match | (none) |",
        *([f"| unless | `{_cell(rule.unless.pattern)}` |"] if rule.unless is not None else []),
        *([f"| unless (decided by the guide) | {len(rule.decided)} phrases of other layers (see the top) |"]
          if rule.decided else []),
        f"| evidence cited | {_cell(rule.cites)} |",
        f"| expected | {_cell(rule.expected or '-')} |",
        f"| next step | `{_cell(rule.next_step)}` |",
        "",
    ]
    return lines


def render(*, rules: tuple[catalogue.Rule, ...], decided: tuple[catalogue.Decided, ...] = ()) -> str:
    """The whole document, grouped by layer in the seeds' order."""
    from bot.diagnosis.classify.engine import CONFIDENT
    from bot.diagnosis.classify.matching import MATCH_HEAD_CHARS, MATCH_TAIL_CHARS

    lines = [HEADER.format(confident=CONFIDENT, head=MATCH_HEAD_CHARS, tail=MATCH_TAIL_CHARS)]
    lines.append("| rule | layer | role | severity |")
    lines.append("|---|---|---|---|")
    lines += [f"| `{rule.id}` | {rule.layer.value} | {rule.role} | {rule.severity.value} |" for rule in rules]
    lines.append("")
    if decided:
        lines += _decided_section(decided)
    for layer in findings.Layer:
        lines += [f"## {layer.value}", ""]
        for rule in (item for item in rules if item.layer is layer):
            lines += _rule_section(rule)
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    """Print the document to stdout."""
    sys.stdout.write(render(rules=catalogue.load_rules(), decided=catalogue.load_decided()))


if __name__ == "__main__":
    main()
