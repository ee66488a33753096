"""docs/rules.md is exactly what the catalogue generates: the documentation cannot drift."""

from __future__ import annotations

from bot.diagnosis.classify import catalogue, docs
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "rules.md"


def test_the_committed_rules_doc_equals_the_generated_one() -> None:
    generated = docs.render(rules=catalogue.load_rules(), decided=catalogue.load_decided())
    assert DOC.read_text(encoding="utf-8") == generated, "run: python -m bot.diagnosis.classify.docs > docs/rules.md"


def test_the_doc_lists_every_rule_with_its_next_step() -> None:
    text = docs.render(rules=catalogue.load_rules(), decided=catalogue.load_decided())
    for rule in catalogue.load_rules():
        assert f"### `{rule.id}`" in text
    assert "next step" in text
