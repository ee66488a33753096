"""The classifier a responder uses (rules first, then the learned model) agrees with the older labelled corpus on at
least 95% of lines; docs/classification.md measures the whole corpus, held out by family."""

from __future__ import annotations

import collections

import pytest

from bot.diagnosis.classify.hybrid import classify_text
from tests.bot.diagnosis.classify.corpus import CORPUS, SECOND_SET, load_corpus

REQUIRED_ACCURACY = 0.95


def test_the_corpus_has_at_least_150_real_messages_with_sources_and_every_layer() -> None:
    corpus = load_corpus()
    assert len(corpus) >= 150
    counts = collections.Counter(item.layer for item in corpus)
    assert all(counts[layer] >= 20 for layer in ("scheduler", "runtime", "workflow", "fabric"))
    assert counts[None] >= 5
    assert all(item.source.startswith(("https://", "seed:")) for item in corpus)


@pytest.mark.parametrize("path", [CORPUS, SECOND_SET], ids=["corpus", "second-set"])
def test_layer_accuracy_on_the_corpus_is_at_least_95_percent(path) -> None:
    corpus = load_corpus(path=path)
    wrong = []
    for item in corpus:
        result = classify_text(item.text)
        got = result.layer.value if result.layer else None
        if got != item.layer:
            wrong.append(f"want {item.layer} got {got} ({result.rule}): {item.text[:100]}")
    accuracy = 1 - len(wrong) / len(corpus)
    assert accuracy >= REQUIRED_ACCURACY, "\n".join(wrong)


def test_lines_labelled_unknown_never_get_a_guessed_layer() -> None:
    items = load_corpus() + load_corpus(path=SECOND_SET)
    guessed = [item.text for item in items if item.layer is None and classify_text(item.text).layer]
    assert guessed == []


def test_every_classified_line_names_its_rule_and_a_next_step() -> None:
    for item in load_corpus():
        result = classify_text(item.text)
        if result.layer is not None:
            assert (result.rule or result.learned) and result.next, item.text
