"""Rules first, then the learned model for lines no rule explains: one answer per line, saying which gave it.

A rule's answer is precise and carries its own next step. When no rule matches, the learned model (numpy
only, loaded on the first line that needs it: any line a rule decides or none explains) may name a layer: the result says `learned`, its calibrated
confidence, the three nearest labelled corpus lines as evidence, and the one next step of that layer.

A rule's layer also needs the model not to rule it out: where the model gives that layer under VETO_BELOW,
rule and model disagree and the line abstains (unless the labelled corpus holds it), keeping the rule and its
next step as a hint. On families no rule was written from, rule answers the model doubts that much were right
about four times in ten (docs/classification.md).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.diagnosis.classify import anomaly, engine, lines
from bot.evidence import findings

if TYPE_CHECKING:
    from bot.diagnosis.classify import learned

# A rule's layer stands unless the learned model gives it less than this (then the line abstains).
VETO_BELOW = 0.2
# One short next step per layer, for answers no rule carries a command for.
NEXT_BY_LAYER: dict[findings.Layer, str] = {
    findings.Layer.SCHEDULER: (
        "kubectl describe pod <pod> | sed -n '/Events/,$p'   # or: squeue -j <job> -o '%r'; read the placement"
        " refusal (capacity, quota, taint, partition) and change the request or the queue"
    ),
    findings.Layer.RUNTIME: (
        "kubectl describe node <node>; nvidia-smi -q on that node   # the node, GPU, driver or container"
        " runtime that ran it: check it before touching the job"
    ),
    findings.Layer.FABRIC: (
        "ibstat / fi_info -p efa / rerun with NCCL_DEBUG=INFO on the nodes named   # the links, NICs or"
        " storage path between nodes"
    ),
    findings.Layer.WORKFLOW: (
        "kubectl get <workload> -o yaml   # or the job script: the image, model files, code, arguments or"
        " parallelism settings the line names"
    ),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Result:
    """Per line: the layer (None: abstain), the rule or `learned`, scope, next step, and for learned answers
    the calibrated confidence and nearest labelled examples."""

    layer: findings.Layer | None
    rule: str | None
    scope: findings.Scope | None
    next: str
    title: str = ""
    learned: bool = False
    confidence: float | None = None
    nearest: tuple[findings.LabelledExample, ...] = ()
    weak_rule: bool = False
    # The rule named a layer the learned model gives under VETO_BELOW, so the rule did not decide alone.
    doubted: bool = False
    # The labelled corpus holds this line: the layer is its label and nearest[0] is that row.
    known: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; `layer` is null when unknown."""
        return findings._plain(self)


@functools.cache
def _model() -> learned.Model | None:
    """The learned model, or None when the artifact is not installed (then rules alone answer)."""
    from bot.diagnosis.classify import learned

    try:
        return learned.model()
    except FileNotFoundError:
        return None


@functools.cache
def _weak_rules() -> frozenset[str]:
    """Ids of rules that do not decide a line alone: symptoms (a consequence whose layer other evidence
    decides) and fallbacks (un-itemised catch-alls such as any `NCCL WARN` or any Xid)."""
    return frozenset(rule.id for rule in engine.load() if rule.is_symptom or rule.fallback)


def decisive(result: lines.LineResult) -> bool:
    """Does the rule answer decide the line's layer? Not when every rule it matched is weak.

    A symptom (`Back-off restarting failed container`, `connection refused`) names a consequence, and a
    catch-all says only which tool complained; the labelling guide gives such a line no layer on its own
    unless its words say more. The learned model (whose null class learned what undecidable lines look
    like) decides those; when it abstains, the rule and its next step are still shown, with no layer.
    """
    if result.rule is None:
        return False
    weak = _weak_rules()
    return not (result.rule in weak and all(rule in weak for rule in result.also))


def _from_rules(result: lines.LineResult) -> Result:
    return Result(layer=result.layer, rule=result.rule, scope=result.scope, next=result.next, title=result.title)


def _weak_only(result: lines.LineResult) -> Result:
    return Result(layer=None, rule=result.rule, scope=None, next=result.next,
                  title=f"{result.title} (a symptom or catch-all: the line alone does not decide the layer)",
                  weak_rule=True)


def _doubted(result: lines.LineResult, *, layer: str, probabilities: Sequence[float]) -> Result:
    return Result(layer=None, rule=result.rule, scope=None, next=result.next,
                  title=f"{result.title} (the learned model gives {layer} only"
                        f" {_probability_of(layer=layer, probabilities=probabilities):.0%}: the rule alone does"
                        " not decide the layer)",
                  weak_rule=True, doubted=True)


def _probability_of(*, layer: str, probabilities: Sequence[float]) -> float:
    from bot.diagnosis.classify import learned

    return float(probabilities[learned.CLASSES.index(layer)])


def doubts(*, layer: str, probabilities: Sequence[float]) -> bool:
    """Does the model rule out a rule's layer (its calibrated probability, CLASSES order, under VETO_BELOW)?"""
    return _probability_of(layer=layer, probabilities=probabilities) < VETO_BELOW


def _from_model(prediction: learned.Prediction) -> Result:
    if prediction.layer is None:
        return Result(layer=None, rule=None, scope=None, next="")
    layer = findings.Layer(prediction.layer)
    return Result(
        layer=layer,
        rule=None,
        scope=findings.Scope.WORKLOAD if layer is findings.Layer.WORKFLOW else None,
        next=NEXT_BY_LAYER[layer],
        title=_title(prediction=prediction, layer=layer),
        learned=True,
        confidence=prediction.probability,
        nearest=prediction.nearest,
        known=prediction.known,
    )


def _title(*, prediction: learned.Prediction, layer: findings.Layer) -> str:
    if prediction.known and prediction.nearest:
        return (f"Known line: the labelled corpus gives it {layer.value} ({prediction.nearest[0].family});"
                " no rule matched")
    return f"Learned: reads like a {layer.value} problem ({prediction.probability:.0%}); no rule matched"


def classify_texts(texts: Sequence[str]) -> list[Result]:
    """Many lines at once: rules per line, the model's check of their layers, then one vectorised learned pass
    over the lines left."""
    empty = Result(layer=None, rule=None, scope=None, next="")
    results: list[Result] = []
    unexplained: list[int] = []
    decided: list[tuple[int, lines.LineResult]] = []
    for index, (text, found) in enumerate(zip(texts, lines.classify_lines(texts), strict=True)):
        if decisive(found):
            results.append(_from_rules(found))
            decided.append((index, found))
            continue
        results.append(_weak_only(found) if found.rule else empty)
        if text.strip():
            unexplained.append(index)
    model = _model() if decided or unexplained else None
    if model is None:
        return results
    doubted: list[int] = []
    if decided:
        checks = model.probabilities([texts[index] for index, _found in decided])
        for (index, found), row in zip(decided, checks, strict=True):
            if found.layer is not None and doubts(layer=found.layer.value, probabilities=row):
                results[index] = _doubted(found, layer=found.layer.value, probabilities=row)
                doubted.append(index)
    asked = sorted([*unexplained, *doubted])
    if asked:
        predictions = model.predict([texts[index] for index in asked])
        rule_doubted = set(doubted)
        for index, prediction in zip(asked, predictions, strict=True):
            # A doubted rule's line takes only the corpus's own label: rule and model disagree, so neither decides.
            if prediction.layer is not None and (prediction.known or index not in rule_doubted):
                results[index] = _from_model(prediction)
    return results


def classify_text(text: str) -> Result:
    """One line: the rule's answer, else the learned model's (or an abstention)."""
    return classify_texts([text])[0]


# The learned pass over a snapshot is bounded: at most this many unexplained lines are scored.
MAX_LEARNED_LINES = 64
_LEARNED_SEVERITY = findings.Severity.LOW


def unexplained_lines(
    *, unexplained: Sequence[findings.Observation], tails: Sequence[findings.Observation]
) -> list[tuple[findings.Observation, str]]:
    """(observation, line) pairs no rule explains: unexplained observations' text, then abnormal log-tail lines."""
    pairs: list[tuple[findings.Observation, str]] = []
    seen: set[str] = set()
    for obs in unexplained:
        text = " ".join(obs.text.split())
        if text and text not in seen:
            seen.add(text)
            pairs.append((obs, text))
    for obs in tails:
        for raw in obs.text.splitlines():
            text = " ".join(raw.split())
            if len(pairs) >= MAX_LEARNED_LINES:
                return pairs
            if not text or text in seen:
                continue
            seen.add(text)
            if anomaly.looks_abnormal(observation=lines.text_observation(text=text)) and \
                    lines.classify_line(text).layer is None:
                pairs.append((obs, text))
    return pairs[:MAX_LEARNED_LINES]


def learned_findings(*, pairs: Sequence[tuple[findings.Observation, str]]) -> list[findings.Finding]:
    """One learned finding per layer the model names for lines no rule explains (strongest first)."""
    model = _model() if pairs else None
    if model is None:
        return []
    predictions = model.predict([text for _obs, text in pairs])
    by_layer: dict[str, list[tuple[findings.Observation, str, learned.Prediction]]] = {}
    for (obs, text), prediction in zip(pairs, predictions, strict=True):
        if prediction.layer is not None:
            by_layer.setdefault(prediction.layer, []).append((obs, text, prediction))
    found = []
    for name, items in by_layer.items():
        items.sort(key=lambda item: -item[2].probability)
        layer = findings.Layer(name)
        obs, text, best = items[0]
        count = f" ({len(items)} lines)" if len(items) > 1 else ""
        found.append(findings.Finding(
            layer=layer,
            rule=f"learned.{layer.value}",
            severity=_LEARNED_SEVERITY,
            summary=(f"Known line, no rule matched: the labelled corpus gives it {layer.value}{count}: "
                     if best.known else
                     f"Learned, no rule matched: reads like {layer.value} ({best.probability:.0%}){count}: ")
                    + text[:200],
            evidence=tuple(
                findings.Evidence(source=item_obs.source, command=item_obs.command, excerpt=item_text[:4000],
                                  observed_at=item_obs.observed_at, observed=item_text[:200])
                for item_obs, item_text, _prediction in items[:20]
            ),
            next_step=NEXT_BY_LAYER[layer],
            scope=findings.Scope.WORKLOAD if layer is findings.Layer.WORKFLOW else None,
            subject=obs.subject,
            learned=True,
            confidence=best.probability,
            nearest=best.nearest,
        ))
    return sorted(found, key=lambda item: -(item.confidence or 0.0))
