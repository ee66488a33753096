"""Honest evaluation: leave-one-family-out for the hybrid (rules first, then the learned model).

For each family F the learned model is trained without F, and every rule whose `derived_from` names F
(alone or with others: a rule written with F's lines in view was tuned on F) is switched off, then F's lines
are scored. Per family: accuracy (the right layer; for a null line,
abstaining is right), abstained, and confidently wrong (a layer given that is wrong); the overall figure
is the mean over families. The in-sample corpus score (full rules, model trained on everything) is
reported beside it and proves little on its own.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from bot.diagnosis.classify import catalogue, corpus, hybrid, learned, lines

LEARNED_PRECISION = 0.9
MIN_ANSWERED = 5
THRESHOLDS = tuple(round(value, 2) for value in np.arange(0.30, 0.96, 0.01))


@functools.cache
def derived_from() -> dict[str, frozenset[str]]:
    """Rule id -> the corpus families its lines were written from (raw YAML: the catalogue does not keep it)."""
    text = resources.files("bot.diagnosis.classify").joinpath("rules.yaml").read_text(encoding="utf-8")
    documents = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    missing = [str(item["id"]) for item in documents if "derived_from" not in item]
    if missing:
        raise catalogue.CatalogueError(f"rules without derived_from (list the families read to write them): {missing}")
    return {str(item["id"]): frozenset(item["derived_from"] or ()) for item in documents}


def rules_without(*, family: str | None) -> tuple[catalogue.Rule, ...]:
    """The catalogue minus every rule whose lines were read from `family` (all of it when family is None)."""
    sources = derived_from()
    return tuple(
        rule for rule in catalogue.load_rules()
        if family is None or family not in sources.get(rule.id, frozenset())
    )


def rule_layers(*, rows: Sequence[corpus.Row], held_out: bool) -> list[str | None]:
    """The rule path's decisive layer per line (None: no rule, or only symptoms), honest per family when held_out."""
    by_family: dict[str, tuple[catalogue.Rule, ...]] = {}
    found = []
    for row in rows:
        key = row.family if held_out else ""
        if key not in by_family:
            by_family[key] = rules_without(family=row.family if held_out else None)
        result = lines.classify_line(row.text, rules=by_family[key])
        found.append(result.layer.value if result.layer and hybrid.decisive(result) else None)
    return found


# A line no other corpus row holds (the known-line look-up has nothing to say).
UNKNOWN = "unknown"


def known_layers(*, rows: Sequence[corpus.Row], held_out: bool) -> list[str | None]:
    """The known-line look-up's answer per line (learned.known_lines): the label of the corpus rows holding the
    same folded text, None when they disagree, UNKNOWN when none does; held_out looks only at other families."""
    folded = [learned.normalise(" ".join(row.text.split())) for row in rows]
    groups: dict[str, list[int]] = collections.defaultdict(list)
    for index, text in enumerate(folded):
        groups[text].append(index)
    found: list[str | None] = []
    for index, row in enumerate(rows):
        others = [other for other in groups[folded[index]] if not held_out or rows[other].family != row.family]
        if not others:
            found.append(UNKNOWN)
            continue
        table = learned.known_lines([(folded[other], rows[other].layer) for other in others])
        first = table[folded[index]]
        found.append(rows[others[first]].layer if first >= 0 else None)
    return found


def decide(*, rule_layer: str | None, probabilities: np.ndarray, thresholds: Sequence[float],
           known: str | None = UNKNOWN, check_rules: bool = True) -> tuple[str | None, bool]:
    """Hybrid decision for one line: (layer or None, whether the learned path gave it): a rule the model does
    not rule out (hybrid.doubts; `check_rules` False keeps every rule; a doubted rule's line takes only the
    known-line look-up's label), else the known-line look-up, else the model at its layer's threshold."""
    if rule_layer is not None and not (check_rules and hybrid.doubts(layer=rule_layer, probabilities=probabilities)):
        return rule_layer, False
    if known != UNKNOWN:
        return known, known is not None
    if rule_layer is not None:  # doubted, and the corpus does not hold the line: neither decides
        return None, False
    klass = int(probabilities.argmax())
    if not learned.names_layer(klass=klass, probability=float(probabilities[klass]), thresholds=thresholds):
        return None, False
    return learned.CLASSES[klass], True


@dataclasses.dataclass(frozen=True, kw_only=True)
class FamilyScore:
    """One family's figures (fractions of its lines)."""

    family: str
    lines: int
    accuracy: float
    abstained: float
    confidently_wrong: float
    by_rules: float
    by_model: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Score:
    """Per-family figures and their means (the headline) plus line-weighted figures for reference."""

    families: tuple[FamilyScore, ...]
    accuracy: float
    abstained: float
    confidently_wrong: float
    line_accuracy: float
    line_confidently_wrong: float
    thresholds: tuple[float, ...]


def score(
    *, rows: Sequence[corpus.Row], rule_found: Sequence[str | None], probabilities: np.ndarray,
    thresholds: Sequence[float], known: Sequence[str | None] | None = None, check_rules: bool = True,
) -> Score:
    """Per-family accuracy, abstentions and confidently-wrong for one set of decisions (`known`: the
    known-line look-up's answers from known_layers; None leaves the look-up out; `check_rules` False keeps
    every rule's answer, for rules alone)."""
    known = [UNKNOWN] * len(rows) if known is None else known
    answers = []
    for rule_layer, probs, corpus_layer in zip(rule_found, probabilities, known, strict=True):
        layer, by_model = decide(rule_layer=rule_layer, probabilities=probs, thresholds=thresholds,
                                 known=corpus_layer, check_rules=check_rules)
        answers.append((layer, layer is not None and not by_model, by_model))
    return tally(rows=rows, answers=answers, thresholds=thresholds)


def tally(*, rows: Sequence[corpus.Row], answers: Sequence[tuple[str | None, bool, bool]],
          thresholds: Sequence[float]) -> Score:
    """Per-family figures from each line's answer: (layer or None, given by a rule, given by the learned path)."""
    tallies: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for row, (layer, by_rule, by_model) in zip(rows, answers, strict=True):
        count = tallies[row.family]
        count["lines"] += 1
        count["right"] += layer == row.layer
        count["abstained"] += layer is None
        count["wrong"] += layer is not None and layer != row.layer
        count["rules"] += by_rule
        count["model"] += by_model
    families = tuple(
        FamilyScore(
            family=family, lines=count["lines"], accuracy=count["right"] / count["lines"],
            abstained=count["abstained"] / count["lines"], confidently_wrong=count["wrong"] / count["lines"],
            by_rules=count["rules"] / count["lines"], by_model=count["model"] / count["lines"],
        )
        for family, count in sorted(tallies.items())
    )
    total = sum(item.lines for item in families)
    return Score(
        families=families,
        accuracy=float(np.mean([item.accuracy for item in families])),
        abstained=float(np.mean([item.abstained for item in families])),
        confidently_wrong=float(np.mean([item.confidently_wrong for item in families])),
        line_accuracy=sum(item.accuracy * item.lines for item in families) / total,
        line_confidently_wrong=sum(item.confidently_wrong * item.lines for item in families) / total,
        thresholds=tuple(thresholds),
    )


def choose_thresholds(
    *, rule_found: Sequence[str | None], y: np.ndarray, probabilities: np.ndarray,
    known: Sequence[str | None] | None = None,
) -> tuple[float, ...]:
    """On held-out families only, per layer: the lowest threshold at which the learned model's answers of that
    layer (on lines no held-out rule decided, `rule_found` from `rule_layers(held_out=True)`, and no other
    family's corpus row holds, `known` from `known_layers(held_out=True)`) are right LEARNED_PRECISION of the
    time against the class indices `y`, over at least MIN_ANSWERED lines (a wrong layer costs a responder
    more than an abstention). Null never answers."""
    known = [UNKNOWN] * len(rule_found) if known is None else known
    free = [index for index, (found, corpus_layer) in enumerate(zip(rule_found, known, strict=True))
            if found is None and corpus_layer == UNKNOWN]
    top = probabilities.argmax(axis=1)
    confidence = probabilities.max(axis=1)
    chosen = [1.0] * len(learned.CLASSES)
    for klass in range(len(learned.CLASSES)):
        if klass == learned.NULL_CLASS:
            continue
        chosen[klass] = THRESHOLDS[-1]
        for value in THRESHOLDS:
            answered = [index for index in free if top[index] == klass and confidence[index] >= value]
            if len(answered) >= MIN_ANSWERED and np.mean(y[answered] == klass) >= LEARNED_PRECISION:
                chosen[klass] = value
                break
    return tuple(chosen)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Evaluation:
    """Leave-one-family-out and in-sample scores, plus the held-out calibration table."""

    held_out: Score
    in_sample: Score
    # In-sample without the known-line look-up: how well rules and the model alone fit the corpus.
    in_sample_without_known: Score
    reliability: tuple[tuple[float, float, int], ...]
    rules_only_held_out: Score


def reliability(*, probabilities: np.ndarray, y: np.ndarray, bins: int = 5) -> tuple[tuple[float, float, int], ...]:
    """Held-out (mean top probability, accuracy, lines) per probability bin: calibration at a glance."""
    top = probabilities.max(axis=1)
    right = probabilities.argmax(axis=1) == y
    edges = np.linspace(top.min(initial=0.0), 1.0, bins + 1)
    table = []
    for low, high in itertools.pairwise(edges):
        inside = (top >= low) & ((top < high) | (high == 1.0))
        if inside.any():
            table.append((float(top[inside].mean()), float(right[inside].mean()), int(inside.sum())))
    return tuple(table)


def run(*, rows: Sequence[corpus.Row] | None = None, workers: int | None = None) -> Evaluation:
    """Leave-one-family-out with the artifact's calibration and threshold method, retraining per family
    (`workers` processes for the fits, as train.out_of_family_logits)."""
    from bot.diagnosis.classify import train

    rows = list(corpus.load() if rows is None else rows)
    texts = [" ".join(row.text.split()) for row in rows]
    space = train.feature_space(texts=texts)
    y = train.labels(rows)
    held_logits = train.out_of_family_logits(rows=rows, space=space, workers=workers)
    scale = train.temperature(logits=held_logits, y=y)
    held_probabilities = learned.softmax(held_logits / scale)
    rule_held = rule_layers(rows=rows, held_out=True)
    known_held = known_layers(rows=rows, held_out=True)
    thresholds = choose_thresholds(rule_found=rule_held, y=y, probabilities=held_probabilities, known=known_held)
    model = learned.model()
    in_probabilities = model.probabilities(texts)
    rule_in = rule_layers(rows=rows, held_out=False)
    never = np.zeros((len(rows), len(learned.CLASSES)))
    never[:, learned.NULL_CLASS] = 1.0
    return Evaluation(
        held_out=score(rows=rows, rule_found=rule_held, probabilities=held_probabilities, thresholds=thresholds,
                       known=known_held),
        in_sample=score(rows=rows, rule_found=rule_in, probabilities=in_probabilities,
                        thresholds=model.thresholds, known=known_layers(rows=rows, held_out=False)),
        in_sample_without_known=score(rows=rows, rule_found=rule_in, probabilities=in_probabilities,
                                      thresholds=model.thresholds),
        reliability=reliability(probabilities=held_probabilities, y=y),
        rules_only_held_out=score(rows=rows, rule_found=rule_held, probabilities=never, thresholds=thresholds,
                                  check_rules=False),
    )


def unseen(*, rows: Sequence[corpus.Row]) -> Score:
    """The shipped classifier (every rule, the packaged model) on lines it was never built from: a new family
    scored before it joins the corpus is the one figure no rule or training run has seen."""
    answers = [
        (result.layer.value if result.layer else None, bool(result.layer) and not result.learned,
         bool(result.layer) and result.learned)
        for result in hybrid.classify_texts([row.text for row in rows])
    ]
    return tally(rows=rows, answers=answers, thresholds=learned.model().thresholds)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RuleTally:
    """One rule on lines it was not written from: answers it decided and how many were right, and lines it
    matched where the model doubted its layer (and how many of those its layer would have got right)."""

    rule: str
    decided: int
    right: int
    doubted: int
    doubted_right: int


def rule_tallies(*, rows: Sequence[corpus.Row]) -> list[RuleTally]:
    """Per rule, the shipped classifier's rule answers on new lines, least precise first: which rules to narrow."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for row, result in zip(rows, hybrid.classify_texts([row.text for row in rows]), strict=True):
        if result.rule is None:
            continue
        count = counts[result.rule]
        if result.doubted:
            rule_layer = lines.classify_line(row.text).layer
            count["doubted"] += 1
            count["doubted_right"] += rule_layer is not None and rule_layer.value == row.layer
        elif result.layer is not None:
            count["decided"] += 1
            count["right"] += result.layer.value == row.layer
    tallies = [RuleTally(rule=rule, decided=count["decided"], right=count["right"], doubted=count["doubted"],
                         doubted_right=count["doubted_right"]) for rule, count in counts.items()]
    return sorted(tallies, key=lambda item: (item.right - item.decided, item.rule))


def rule_table(*, tallies: Sequence[RuleTally]) -> list[str]:
    """Markdown rows for rule_tallies."""
    table = ["| rule | decided | right | doubted by the model | doubted, rule was right |", "|---|---:|---:|---:|---:|"]
    table += [f"| `{item.rule}` | {item.decided} | {item.right} | {item.doubted} | {item.doubted_right} |"
              for item in tallies if item.decided or item.doubted]
    return table


def unseen_table(*, figures: Score) -> list[str]:
    """Markdown rows for a never-seen families' score: per family, then the mean over them."""
    table = ["| family | lines | accuracy | abstained | confidently wrong | by rules | by model |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for item in sorted(figures.families, key=lambda family: (family.accuracy, family.family)):
        table.append(f"| {item.family} | {item.lines} | {item.accuracy:.0%} | {item.abstained:.0%} |"
                     f" {item.confidently_wrong:.0%} | {item.by_rules:.0%} | {item.by_model:.0%} |")
    table.append(f"| **mean over {len(figures.families)} families** | {sum(i.lines for i in figures.families)} |"
                 f" **{figures.accuracy:.1%}** | {figures.abstained:.1%} | **{figures.confidently_wrong:.1%}** | | |")
    return table


def describe(thresholds: Sequence[float]) -> str:
    """`scheduler 0.67, runtime 0.78, ...`: the per-layer thresholds for people."""
    return ", ".join(f"{name} {value:.2f}" for name, value in zip(learned.CLASSES, thresholds, strict=True)
                     if name != "null")


def _markdown(*, evaluation: Evaluation, lines_total: int, sealed: list[str]) -> dict[str, list[str]]:
    """docs/classification.md's figure blocks (headline, per-family table, calibration, the sealed families'
    table) as Markdown lines."""
    held, inside, rules_only = evaluation.held_out, evaluation.in_sample, evaluation.rules_only_held_out
    headline = ["| | accuracy | abstained | confidently wrong |", "|---|---:|---:|---:|"]
    for title, figures in (("Hybrid, held-out family (LOFO, the headline)", held),
                           ("Rules alone, held-out family", rules_only),
                           ("Hybrid, in-sample corpus (full rules, model trained on everything)", inside),
                           ("In-sample without the known-line look-up (rules and model alone)",
                            evaluation.in_sample_without_known)):
        headline.append(f"| {title} | {figures.accuracy:.1%} | {figures.abstained:.1%} |"
                        f" {figures.confidently_wrong:.1%} |")
    headline += ["", (
        f"{lines_total:,} lines, {len(held.families)} families, thresholds {describe(held.thresholds)}. Line-weighted"
        f" held-out: accuracy {held.line_accuracy:.1%}, confidently wrong {held.line_confidently_wrong:.1%};"
        f" in-sample line-weighted accuracy {inside.line_accuracy:.1%}. The learned model adds"
        f" {100 * (held.accuracy - rules_only.accuracy):.1f} points of held-out accuracy over rules alone for"
        f" {100 * (held.confidently_wrong - rules_only.confidently_wrong):.1f} points of confidently wrong.")]
    families = ["| family | lines | accuracy | abstained | confidently wrong | by rules | by model |",
                "|---|---:|---:|---:|---:|---:|---:|"]
    for item in sorted(held.families, key=lambda family: (family.accuracy, family.family)):
        families.append(f"| {item.family} | {item.lines} | {item.accuracy:.0%} | {item.abstained:.0%} |"
                        f" {item.confidently_wrong:.0%} | {item.by_rules:.0%} | {item.by_model:.0%} |")
    calibration = ["  | mean top probability | accuracy | lines |", "  |---:|---:|---:|"]
    calibration += [f"  | {mean:.2f} | {right:.2f} | {count} |" for mean, right, count in evaluation.reliability]
    return {"headline": headline, "families": families, "reliability": calibration, "sealed": sealed}


def update_docs(*, path: Path) -> Evaluation:
    """Re-measure and rewrite the figure blocks between `<!-- figures:NAME -->` markers in `path`."""
    rows = corpus.load()
    evaluation = run(rows=rows)
    text = path.read_text(encoding="utf-8")
    sealed_rows = corpus.unseen()
    sealed = unseen_table(figures=unseen(rows=sealed_rows)) if sealed_rows else []
    for name, body in _markdown(evaluation=evaluation, lines_total=len(rows), sealed=sealed).items():
        pattern = re.compile(rf"([ ]*<!-- figures:{name} -->\n).*?([ ]*<!-- /figures:{name} -->)", re.DOTALL)
        text = pattern.sub(lambda found, body=body: found.group(1) + "\n".join(body) + "\n" + found.group(2), text)
    path.write_text(text, encoding="utf-8")
    return evaluation


def main(argv: Sequence[str] | None = None) -> int:
    """Refresh docs/classification.md's figures, or (--unseen [FILE...]) score the shipped classifier on new files
    (by default the sealed families)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--unseen", nargs="*", type=Path, metavar="FILE",
                        help="corpus-format JSONL files of families not in the corpus (none: the sealed families in"
                             " tests/corpus/unseen/): score them and print a table")
    parser.add_argument("--by-rule", action="store_true",
                        help="with --unseen FILE...: also each rule's answers on those lines (never on the sealed"
                             " families: reading their errors to fix rules would unseal them)")
    args = parser.parse_args(argv)
    if args.by_rule and not args.unseen:
        parser.error("--by-rule needs --unseen FILE...: the sealed families' errors are not read rule by rule")
    if args.unseen is not None:
        rows = corpus.read_files(paths=args.unseen) if args.unseen else corpus.unseen()
        print("\n".join(unseen_table(figures=unseen(rows=rows))))
        if args.by_rule:
            print("\n" + "\n".join(rule_table(tallies=rule_tallies(rows=rows))))
        return 0
    update_docs(path=Path(__file__).resolve().parents[3] / "docs" / "classification.md")
    return 0


if __name__ == "__main__":
    # python -m bot.diagnosis.classify.evaluate            -> refreshes docs/classification.md's figures
    # python -m bot.diagnosis.classify.evaluate --unseen F  -> the shipped classifier on a family it never saw
    # python -m bot.diagnosis.classify.evaluate --unseen    -> the same on the sealed families (tests/corpus/unseen)
    raise SystemExit(main())
