"""Leave-one-family-out: the hybrid on families it never saw stays above the floors measured when it was built.

The floors sit a little under docs/classification.md's figures, so a regression fails here; raise them as
the classifier improves. Speed is measured in bench/bench_classify.py, never asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bot.diagnosis.classify import corpus, evaluate

# Measured (docs/classification.md), minus a margin for corpus growth.
FLOOR_HELD_OUT_ACCURACY = 0.53
CEILING_HELD_OUT_CONFIDENTLY_WRONG = 0.03
FLOOR_IN_SAMPLE_ACCURACY = 0.97
FLOOR_IN_SAMPLE_WITHOUT_KNOWN_LINES = 0.66
FLOOR_LEARNED_GAIN = 0.08


@pytest.fixture(scope="module")
def evaluation() -> evaluate.Evaluation:
    return evaluate.run()


def test_mean_accuracy_over_held_out_families_stays_above_its_floor(evaluation: evaluate.Evaluation) -> None:
    assert evaluation.held_out.accuracy >= FLOOR_HELD_OUT_ACCURACY


def test_confidently_wrong_over_held_out_families_stays_under_its_ceiling(
    evaluation: evaluate.Evaluation,
) -> None:
    assert evaluation.held_out.confidently_wrong <= CEILING_HELD_OUT_CONFIDENTLY_WRONG


def test_the_learned_model_adds_accuracy_over_rules_alone_on_held_out_families(
    evaluation: evaluate.Evaluation,
) -> None:
    gain = evaluation.held_out.accuracy - evaluation.rules_only_held_out.accuracy
    assert gain >= FLOOR_LEARNED_GAIN


def test_in_sample_accuracy_stays_above_its_floor(evaluation: evaluate.Evaluation) -> None:
    assert evaluation.in_sample.accuracy >= FLOOR_IN_SAMPLE_ACCURACY


def test_rules_and_model_alone_fit_the_corpus_above_their_floor_without_the_known_line_look_up(
    evaluation: evaluate.Evaluation,
) -> None:
    assert evaluation.in_sample_without_known.accuracy >= FLOOR_IN_SAMPLE_WITHOUT_KNOWN_LINES
    assert evaluation.in_sample_without_known.accuracy < evaluation.in_sample.accuracy


def _row(text: str, layer: str | None, family: str) -> corpus.Row:
    return corpus.Row(text=text, layer=layer, family=family, source="https://example.org", origin="test")


def test_held_out_a_known_line_is_looked_up_only_in_other_families_and_a_disagreement_abstains() -> None:
    rows = [
        _row("GPU 3 fell off the bus", "runtime", "a"),
        _row("GPU 7 fell off the bus", "runtime", "a"),  # the same line once numbers fold, same family
        _row("gpu 5 fell off the bus", "runtime", "b"),
        _row("queue 1 is closed", "scheduler", "a"),
        _row("queue 2 is closed", None, "b"),
        _row("queue 9 is closed", "scheduler", "c"),
        _row("only here", "workflow", "c"),
    ]
    held = evaluate.known_layers(rows=rows, held_out=True)
    assert held[:3] == ["runtime", "runtime", "runtime"]
    assert held[3] is None and held[5] is None, "the other families disagree: the line alone cannot decide"
    assert held[4] == "scheduler", "families a and c agree"
    assert held[6] == evaluate.UNKNOWN
    inside = evaluate.known_layers(rows=rows, held_out=False)
    assert inside[6] == "workflow" and inside[3] is None


def test_a_rule_answers_before_a_known_line_and_a_known_line_before_the_model() -> None:
    probabilities = np.array([0.0, 0.0, 0.25, 0.74, 0.01])  # the model does not rule out the rule's fabric
    thresholds = [0.5] * 5
    assert evaluate.decide(rule_layer="fabric", probabilities=probabilities, thresholds=thresholds,
                           known="runtime") == ("fabric", False)
    assert evaluate.decide(rule_layer=None, probabilities=probabilities, thresholds=thresholds,
                           known="runtime") == ("runtime", True)
    assert evaluate.decide(rule_layer=None, probabilities=probabilities, thresholds=thresholds,
                           known=None) == (None, False)
    assert evaluate.decide(rule_layer=None, probabilities=probabilities, thresholds=thresholds) == ("workflow", True)


def test_a_rule_the_model_rules_out_abstains_unless_the_corpus_holds_the_line_and_rules_alone_keep_it() -> None:
    probabilities = np.array([0.0, 0.0, 0.1, 0.89, 0.01])  # fabric under hybrid.VETO_BELOW; workflow confident
    thresholds = [0.5] * 5
    assert evaluate.decide(rule_layer="fabric", probabilities=probabilities, thresholds=thresholds) == (None, False)
    assert evaluate.decide(rule_layer="fabric", probabilities=probabilities, thresholds=thresholds,
                           known="runtime") == ("runtime", True)
    assert evaluate.decide(rule_layer="fabric", probabilities=probabilities, thresholds=thresholds,
                           known=None) == (None, False)
    assert evaluate.decide(rule_layer="fabric", probabilities=probabilities, thresholds=thresholds,
                           check_rules=False) == ("fabric", False)


def test_every_family_is_scored_and_the_figures_are_fractions(evaluation: evaluate.Evaluation) -> None:
    assert len(evaluation.held_out.families) >= 20
    for family in evaluation.held_out.families:
        assert 0.0 <= family.confidently_wrong <= 1.0 - family.accuracy + 1e-9
        assert family.abstained + family.confidently_wrong <= 1.0 + 1e-9


def test_the_thresholds_are_chosen_on_held_out_families_as_the_artifact_records(
    evaluation: evaluate.Evaluation,
) -> None:
    from bot.diagnosis.classify import learned

    assert evaluation.held_out.thresholds == pytest.approx(learned.model().thresholds, abs=1e-6)


def test_every_rule_names_the_corpus_families_it_was_derived_from_and_they_exist() -> None:
    from bot.diagnosis.classify import catalogue, corpus

    sources = evaluate.derived_from()
    assert set(sources) == {rule.id for rule in catalogue.load_rules()}
    families = {row.family for row in corpus.load()}
    assert {family for named in sources.values() for family in named} <= families


def test_every_rule_read_from_the_held_out_family_is_switched_off_even_with_other_families_and_no_other() -> None:
    everything = evaluate.rules_without(family=None)
    without = {rule.id for rule in evaluate.rules_without(family="nccl")}
    from_nccl = {rule_id for rule_id, named in evaluate.derived_from().items() if "nccl" in named}
    shared = {rule_id for rule_id in from_nccl if len(evaluate.derived_from()[rule_id]) > 1}
    assert shared, "the check needs a rule derived from nccl and another family"
    assert without == {rule.id for rule in everything} - from_nccl


def test_each_layer_gets_the_lowest_threshold_at_which_its_learned_answers_are_right_nine_times_in_ten() -> None:
    from bot.diagnosis.classify import learned

    scheduler, runtime = learned.CLASSES.index("scheduler"), learned.CLASSES.index("runtime")
    y = np.array([scheduler if index < 16 else runtime for index in range(24)])
    probabilities = np.zeros((len(y), len(learned.CLASSES)))
    probabilities[:10, scheduler] = 0.9  # ten right scheduler answers at 0.9
    probabilities[10:16, runtime] = 0.9  # six scheduler lines the model calls runtime at 0.9 ...
    probabilities[16:, runtime] = 0.6  # ... and eight right runtime answers at only 0.6
    thresholds = evaluate.choose_thresholds(rule_found=[None] * len(y), y=y, probabilities=probabilities)
    assert thresholds[scheduler] == pytest.approx(evaluate.THRESHOLDS[0])
    assert thresholds[runtime] == pytest.approx(evaluate.THRESHOLDS[-1]), "8 right of 14 never reaches 90%"
    assert thresholds[learned.NULL_CLASS] == 1.0


def _new_family_file(*, tmp_path: Path) -> Path:
    """A family the corpus does not hold: one right rule line, one the rule gets wrong, two null lines."""
    rows = [
        {"text": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", "layer": "scheduler"},
        {"text": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.", "layer": "workflow"},
        {"text": "Started container trainer", "layer": None},
        {"text": "Successfully assigned default/x to node-1", "layer": None},
    ]
    path = tmp_path / "new-family.jsonl"
    path.write_text("".join(
        json.dumps({**row, "family": "new-family", "source": "https://example.org/issue/1"}) + "\n" for row in rows
    ), encoding="utf-8")
    return path


def test_a_family_never_seen_is_scored_with_the_shipped_rules_and_model_and_printed_per_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _new_family_file(tmp_path=tmp_path)

    figures = evaluate.unseen(rows=corpus.read_file(path=path))

    (family,) = figures.families
    assert (family.family, family.lines) == ("new-family", 4)
    assert family.accuracy == pytest.approx(3 / 4), "one right layer and two right abstentions"
    assert family.confidently_wrong == pytest.approx(1 / 4), "the line labelled workflow got the rule's scheduler"
    assert family.by_rules == pytest.approx(2 / 4)
    assert evaluate.main(["--unseen", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "| new-family | 4 | 75% | 50% | 25% | 50% | 0% |" in printed
    assert "**mean over 1 families**" in printed


def test_the_sealed_families_are_never_trained_on_and_no_rule_was_written_from_them() -> None:
    sealed = corpus.unseen()
    sealed_families = {row.family for row in sealed}
    assert len(sealed_families) >= 8, "the standing unseen set holds the sealed families"
    trained = corpus.load()
    assert sealed_families.isdisjoint({row.family for row in trained})
    folded = {" ".join(row.text.split()) for row in trained}
    assert not [row.text for row in sealed if " ".join(row.text.split()) in folded], "a sealed line is in the corpus"
    named = {family for families in evaluate.derived_from().values() for family in families}
    assert sealed_families.isdisjoint(named), "a rule names a sealed family it was written from"
    assert {path.stem for path in corpus.unseen_files()} == sealed_families, "one file per sealed family"


def test_the_shipped_classifier_on_the_sealed_families_is_printed_by_unseen_without_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    figures = evaluate.unseen(rows=corpus.unseen())
    # A regression guard, far under the measured figure (docs/classification.md): never a target to tune to.
    assert figures.accuracy >= 0.5
    assert figures.confidently_wrong <= 0.08
    assert evaluate.main(["--unseen"]) == 0
    printed = capsys.readouterr().out
    assert f"**mean over {len(figures.families)} families**" in printed
    assert f"**{figures.accuracy:.1%}**" in printed


def test_by_rule_counts_each_rules_answers_on_new_lines_and_refuses_the_sealed_families(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _new_family_file(tmp_path=tmp_path)

    (tally,) = evaluate.rule_tallies(rows=corpus.read_file(path=path))

    assert (tally.rule, tally.decided, tally.right, tally.doubted) == ("scheduler.k8s.insufficient-resources", 2, 1, 0)
    assert evaluate.main(["--unseen", str(path), "--by-rule"]) == 0
    assert "| `scheduler.k8s.insufficient-resources` | 2 | 1 | 0 | 0 |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        evaluate.main(["--by-rule"])
    assert refused.value.code == 2
    assert "sealed families" in capsys.readouterr().err
