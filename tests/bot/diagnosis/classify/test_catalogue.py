"""The rule catalogue is valid data: every rule complete, unique, and rejected loudly when malformed."""

from __future__ import annotations

import pytest

from bot.diagnosis.classify import catalogue
from bot.evidence import findings


def _raw(**overrides):
    base = {
        "id": "x.rule",
        "layer": "runtime",
        "title": "A rule",
        "severity": "high",
        "cites": "a log line",
        "next": "kubectl logs x",
        "match": {"text": "boom"},
    }
    base.update(overrides)
    return base


def test_the_packaged_catalogue_covers_every_layer_with_unique_ids() -> None:
    rules = catalogue.load_rules()
    assert {rule.layer for rule in rules} == set(findings.Layer)
    assert len({rule.id for rule in rules}) == len(rules)
    assert all(rule.id.startswith(rule.layer.value + ".") for rule in rules)


def test_every_rule_says_what_evidence_it_cites_and_what_to_run_next() -> None:
    for rule in catalogue.load_rules():
        assert rule.cites and rule.next_step and rule.title, rule.id
        assert rule.structured or rule.text is not None, rule.id


def test_symptoms_say_which_layers_can_explain_them() -> None:
    symptoms = [rule for rule in catalogue.load_rules() if rule.is_symptom]
    assert symptoms
    assert all(rule.explained_by for rule in symptoms)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"layer": "network"}, "rule x.rule"),
        ({"match": {}}, "needs fields or text"),
        ({"match": {"text": "("}}, "invalid regex"),
        ({"role": "symptom"}, "must say which layers"),
        ({"next": ""}, "missing"),
        ({"confidence": 1.5}, "confidence"),
        ({"match": {"fields": {"ratio": {"about": 3}}}}, "unknown comparison"),
        ({"match": {"fields": {"reason": ["X"]}, "unless": "y"}}, "narrows a text match"),
        ({"match": {"text": "boom", "unless": "["}}, "invalid regex"),
    ],
)
def test_a_malformed_rule_is_rejected_with_its_id_and_reason(overrides, message) -> None:
    with pytest.raises(catalogue.CatalogueError, match=message):
        catalogue.parse_rules(documents=[_raw(**overrides)])


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(catalogue.CatalogueError, match="duplicate"):
        catalogue.parse_rules(documents=[_raw(), _raw()])


def test_field_conditions_compare_numbers_and_values() -> None:
    from bot.diagnosis.classify import matching
    from tests.bot.diagnosis.classify.observations import observation

    [rule] = catalogue.parse_rules(
        documents=[_raw(match={"kind": ["fabric_probe"], "fields": {"ratio": {"lt": 0.8}, "path": ["a-b"]}})]
    )
    assert matching.match_rule(
        rule=rule, observation=observation(kind="fabric_probe", ratio="0.5", path="A-B")
    )
    assert not matching.match_rule(
        rule=rule, observation=observation(kind="fabric_probe", ratio=0.9, path="a-b")
    )
    assert not matching.match_rule(rule=rule, observation=observation(kind="event", ratio=0.5, path="a-b"))


def test_unless_vetoes_a_text_match_on_the_prefiltered_path_and_the_plain_one_alike() -> None:
    from bot.diagnosis.classify import lines

    rules = catalogue.parse_rules(documents=[
        _raw(id="fabric.ib", layer="fabric", match={"text": "ibv_\\w+ failed", "unless": "Cannot allocate memory"}),
        _raw(id="runtime.memlock", layer="runtime", priority=10, match={"text": "Cannot allocate memory"}),
    ])
    vetoed = "ibv_reg_mr failed: Cannot allocate memory"
    kept = "ibv_modify_qp failed: Invalid argument"
    for classify in (lines.classify_line, lines.classify_line_plain):
        assert classify(vetoed, rules=rules).rule == "runtime.memlock"
        assert classify(kept, rules=rules).rule == "fabric.ib"


def test_a_decided_phrase_vetoes_the_rules_of_other_layers_and_keeps_its_own() -> None:
    from bot.diagnosis.classify import lines

    rules = catalogue.parse_rules(
        documents=[
            _raw(id="runtime.cuda", layer="runtime", priority=80, match={"text": "CUDA error"}),
            _raw(id="workflow.graph", layer="workflow", priority=10, match={"text": "capturing"}),
        ],
        decided=[{"phrase": "stream is capturing", "layer": "workflow", "guide": "hard case 14"}],
    )
    misuse = "CUDA error: operation not permitted when stream is capturing"
    for classify in (lines.classify_line, lines.classify_line_plain):
        assert classify(misuse, rules=rules).rule == "workflow.graph"
        assert classify("CUDA error: out of memory", rules=rules).rule == "runtime.cuda"


def test_a_phrase_decided_to_no_layer_leaves_the_line_to_no_rule() -> None:
    from bot.diagnosis.classify import lines

    rules = catalogue.parse_rules(
        documents=[_raw(id="runtime.xid", match={"text": "Xid", "unless": "Xid 79"})],
        decided=[{"phrase": "Xid 13", "layer": None, "guide": "hard case 14"}],
    )
    assert lines.classify_line("NVRM: Xid 13, Graphics Exception", rules=rules).layer is None
    assert lines.classify_line("NVRM: Xid 79, fallen off the bus", rules=rules).layer is None
    assert lines.classify_line("NVRM: Xid 48, DBE", rules=rules).rule == "runtime.xid"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"phrase": "x", "layer": "runtime"}, "needs `phrase` and `guide`"),
        ({"phrase": "x", "guide": "hard case 1"}, "say its layer"),
        ({"phrase": "x", "layer": "network", "guide": "hard case 1"}, "network"),
        ({"phrase": "(", "layer": None, "guide": "hard case 1"}, "invalid regex"),
    ],
)
def test_a_malformed_decided_phrase_is_rejected_with_the_reason(raw, message) -> None:
    with pytest.raises(catalogue.CatalogueError, match=message):
        catalogue.parse_rules(documents=[_raw()], decided=[raw])


def test_no_packaged_rule_gives_a_corpus_line_holding_a_decided_phrase_another_layer() -> None:
    from bot.diagnosis.classify import corpus, lines

    rules = catalogue.load_rules()
    decided = catalogue.load_decided()
    checked = 0
    for row in corpus.load():
        for item in decided:
            if item.phrase.search(row.text):
                checked += 1
                layer = lines.classify_line(row.text, rules=rules).layer
                assert layer in (None, item.layer), (row.text, item.phrase.pattern)
    assert checked >= 20
