"""The learned path: what a learned answer carries, when it abstains, what it imports, and its artifact."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.diagnosis.classify import corpus, hybrid, learned
from bot.diagnosis.classify.lines import text_observation
from bot.evidence import findings
from handlers.main import typer_app
from tests.support.paths import ROOT

# No rule names this vLLM-style configuration check and the corpus does not hold it; it holds its siblings.
LEARNED_LINE = "ValueError: Number of attention heads (40) must be divisible by tensor parallel size (3)."
# The corpus holds this one (vllm's, with other numbers): a known line.
KNOWN_LINE = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3)."
RULE_LINE = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
# A rule decides this one and the corpus does not hold it.
UNHELD_RULE_LINE = ("0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 8 node(s) didn't match Pod's node"
                    " affinity/selector. preemption: not eligible.")


def test_a_line_no_rule_explains_gets_a_learned_layer_with_three_nearest_examples_and_the_layer_next_step() -> None:
    result = hybrid.classify_text(LEARNED_LINE)
    assert result.learned is True and result.rule is None
    assert result.layer is findings.Layer.WORKFLOW
    workflow = learned.CLASSES.index("workflow")
    assert result.confidence is not None and result.confidence >= learned.model().thresholds[workflow]
    assert len(result.nearest) == 3
    assert all(item.text and item.family and item.layer in (*corpus.LAYERS, None) for item in result.nearest)
    assert result.next == hybrid.NEXT_BY_LAYER[findings.Layer.WORKFLOW]


def test_a_line_no_rule_explains_and_the_model_only_reads_is_not_marked_known() -> None:
    result = hybrid.classify_text(LEARNED_LINE)
    assert result.known is False
    assert result.title.startswith("Learned: reads like a workflow problem")


def test_a_line_the_corpus_holds_up_to_numbers_takes_the_corpus_label_with_that_row_first_in_its_evidence() -> None:
    result = hybrid.classify_text(KNOWN_LINE)
    assert result.learned is True and result.known is True and result.rule is None
    assert result.layer is findings.Layer.WORKFLOW
    assert result.confidence == learned.KNOWN_CONFIDENCE
    first = result.nearest[0]
    assert first.family == "vllm" and learned.normalise(first.text) == learned.normalise(KNOWN_LINE)
    assert first.text != KNOWN_LINE, "the corpus row has other numbers: folding matched it"
    assert result.title.startswith("Known line: the labelled corpus gives it workflow (vllm)")


def test_a_known_null_line_abstains_even_where_the_model_would_name_a_layer() -> None:
    model = learned.model()
    assert model.predict([LEARNED_LINE], with_nearest=False)[0].layer == "workflow"
    evidence = dataclasses.replace(model.evidence, examples=(
        findings.LabelledExample(text=LEARNED_LINE.replace("40", "48"), layer=None, family="vllm"),
    ))
    labelled_null = dataclasses.replace(model, load_evidence=lambda: evidence)
    (prediction,) = labelled_null.predict([LEARNED_LINE], with_nearest=False)
    assert prediction.known is True and prediction.layer is None


def test_lines_the_corpus_labels_differently_once_folded_are_known_to_be_undecidable() -> None:
    table = learned.known_lines([("gpu 0 failed", "runtime"), ("gpu 0 failed", "fabric"), ("gpu 0 ok", None),
                                 ("gpu 0 ok", None)])
    assert table == {"gpu 0 failed": -1, "gpu 0 ok": 2}


def test_a_line_a_rule_explains_keeps_the_rule_and_is_not_marked_learned() -> None:
    result = hybrid.classify_text(RULE_LINE)
    assert result.rule == "scheduler.k8s.insufficient-resources"
    assert result.learned is False and result.confidence is None and result.nearest == ()


def test_a_prediction_below_its_layers_threshold_abstains_whatever_the_other_layers_thresholds() -> None:
    workflow = learned.CLASSES.index("workflow")
    thresholds = [0.0] * len(learned.CLASSES)
    thresholds[workflow] = 0.999
    strict = dataclasses.replace(learned.model(), thresholds=tuple(thresholds))
    prediction = strict.predict([LEARNED_LINE])[0]
    assert prediction.probability < 0.999
    assert prediction.layer is None


def test_every_learned_layer_on_the_corpus_is_at_or_above_its_layers_threshold_and_never_the_null_class() -> None:
    model = learned.model()
    texts = [row.text for row in corpus.load()][:400]
    for prediction in model.predict(texts, with_nearest=False):
        if prediction.layer is not None:
            assert prediction.probability >= model.thresholds[learned.CLASSES.index(prediction.layer)]
            assert prediction.layer != "null"


def test_batch_and_single_line_answers_agree() -> None:
    texts = [LEARNED_LINE, RULE_LINE, "the weather is nice today", "Xid 79 on gpu 3"]
    assert hybrid.classify_texts(texts) == [hybrid.classify_text(text) for text in texts]


def test_inference_imports_neither_scikit_learn_nor_scipy_and_importing_the_classifier_not_even_numpy() -> None:
    script = (
        "import sys\n"
        "from bot.diagnosis.classify import hybrid\n"
        "assert 'numpy' not in sys.modules, 'importing the classifier loaded numpy'\n"
        f"assert not hybrid.classify_text({RULE_LINE!r}).learned  # the model checks the rule's layer\n"
        f"assert hybrid.classify_text({LEARNED_LINE!r}).learned\n"
        "assert not [name for name in sys.modules if name.startswith(('sklearn', 'scipy'))]\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_packaged_model_was_trained_on_the_corpus_as_it_is_now() -> None:
    model = learned.model()
    rows = corpus.load()
    assert model.corpus_hash == corpus.fingerprint(rows=rows), (
        "the corpus changed since model.npz was built: run `triage-bot classify train`"
    )
    assert len(model.examples) == len(rows)


def test_numpy_inference_reproduces_the_logits_training_computed() -> None:
    model = learned.model()
    texts = [example.text for example in model.examples[: len(model.check_logits)]]
    np.testing.assert_allclose(model.logits(texts), model.check_logits, atol=1e-3)


def _write_small_corpus(folder: Path) -> None:
    source = "https://github.com/example/project/issues/1"
    lines = {
        "alpha": [("0/4 nodes are available: 4 Insufficient nvidia.com/gpu", "scheduler"),
                  ("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus", "runtime"),
                  ("NCCL WARN NET/IB : Got completion from peer with error 12", "fabric"),
                  ("manifest unknown: manifest tagged by v9 is not found", "workflow"),
                  ("Back-off restarting failed container", None)],
        "beta": [("pod didn't trigger scale-up: 2 Insufficient nvidia.com/gpu", "scheduler"),
                 ("Xid 48: uncorrectable double-bit ECC error on GPU 2", "runtime"),
                 ("NET/IB : Got async event : port error on mlx5_0", "fabric"),
                 ("pull access denied for private/image, repository does not exist", "workflow"),
                 ("exit code 1", None)],
    }
    (folder / "field").mkdir(parents=True)
    for family, rows in lines.items():
        (folder / "field" / f"{family}.jsonl").write_text("".join(
            json.dumps({"text": text, "layer": layer, "family": family, "source": source}) + "\n"
            for text, layer in rows), encoding="utf-8")


def test_the_train_command_rebuilds_the_artifact_byte_for_byte(tmp_path: Path) -> None:
    _write_small_corpus(tmp_path / "corpus")
    outputs = [tmp_path / "first.npz", tmp_path / "second.npz"]
    for output in outputs:
        result = CliRunner().invoke(
            typer_app(), ["classify", "train", "--corpus", str(tmp_path / "corpus"), "--output", str(output)]
        )
        assert result.exit_code == 0, result.output
        assert "trained on 10 lines from 2 families" in result.output
    refused = CliRunner().invoke(typer_app(), ["classify", "train", "--corpus", str(tmp_path / "corpus"),
                                               "--output", str(tmp_path / "third.npz"), "--workers", "0"])
    assert refused.exit_code != 0 and "--workers" in refused.output and not (tmp_path / "third.npz").exists()
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    model = learned.read(path=outputs[0])
    assert len(model.examples) == 10 and len(model.thresholds) == len(learned.CLASSES)
    assert all(0.0 < value <= 1.0 for value in model.thresholds)


def test_held_out_logits_are_the_same_from_parallel_workers_as_in_process_and_with_every_column_kept(
    tmp_path: Path,
) -> None:
    from scipy import sparse

    from bot.diagnosis.classify import train

    _write_small_corpus(tmp_path / "corpus")
    rows = corpus.load(directory=tmp_path / "corpus")
    space = train.feature_space(texts=[row.text for row in rows])
    in_process = train.out_of_family_logits(rows=rows, space=space, workers=1)
    parallel = train.out_of_family_logits(rows=rows, space=space, workers=2)
    np.testing.assert_array_equal(parallel, in_process)
    # Dropping the columns no training line has (zero idf) is only a speed-up: the full-width fit agrees.
    y = train.labels(rows)
    held = np.array([row.family == "alpha" for row in rows])
    full = space.matrix(idf=train.idf_for(space=space, members=~held))
    coef, intercept = train.fit(matrix=sparse.csr_matrix(full[~held]), y=y[~held])
    np.testing.assert_allclose(in_process[held], full[held] @ coef.T + intercept, atol=1e-6)
    assert not np.allclose(in_process[held], 0.0)


def test_a_bad_corpus_row_is_refused_naming_its_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "field").mkdir()
    good = {"text": "Xid 79", "layer": "runtime", "family": "xid", "source": "https://example.org/xid"}
    bad = {**good, "layer": "network"}
    (tmp_path / "field" / "xid.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(corpus.CorpusError, match=r"xid\.jsonl:2: layer"):
        corpus.load(directory=tmp_path)
    (tmp_path / "field" / "xid.jsonl").write_text(json.dumps({**good, "source": "http://example.org"}) + "\n")
    with pytest.raises(corpus.CorpusError, match=r"xid\.jsonl:1: source must be an https"):
        corpus.load(directory=tmp_path)
    (tmp_path / "field" / "xid.jsonl").write_text(json.dumps({**good, "family": ""}) + "\n")
    with pytest.raises(corpus.CorpusError, match=r"xid\.jsonl:1: family"):
        corpus.load(directory=tmp_path)


def test_every_corpus_row_is_valid_and_tagged_with_its_family() -> None:
    rows = corpus.load()
    assert all(row.family for row in rows)
    assert len({row.family for row in rows}) >= 20


def test_staged_waves_are_valid_rows_outside_the_corpus_and_hold_no_corpus_line() -> None:
    staged = sorted((corpus.CORPUS_DIR / "staged").glob("*/*.jsonl"))
    rows = corpus.read_files(paths=staged)
    assert rows and all(row.family == row.origin.split(":")[0].removesuffix(".jsonl") for row in rows)
    held = corpus.load()
    texts = {learned.normalise(row.text) for row in held}
    assert not [row.text for row in rows if learned.normalise(row.text) in texts]
    assert not {row.family for row in rows} & {row.family for row in held}


def _log(text: str) -> findings.Observation:
    return dataclasses.replace(text_observation(text=text), kind="log_line", subject="pod/ml/trainer-0")


def test_a_learned_finding_is_marked_learned_weighs_less_and_never_overrides_a_rule_verdict() -> None:
    from bot.diagnosis.classify import diagnose_observations

    diagnosis = diagnose_observations([_log(LEARNED_LINE), _log(RULE_LINE)])
    assert diagnosis.verdict.layer is findings.Layer.SCHEDULER
    learned_found = [item for item in diagnosis.findings if item.learned]
    assert [item.layer for item in learned_found] == [findings.Layer.WORKFLOW]
    finding = learned_found[0]
    assert finding.rule == "learned.workflow" and finding.severity is findings.Severity.LOW
    assert len(finding.nearest) == 3 and finding.confidence is not None
    assert finding.next_step == hybrid.NEXT_BY_LAYER[findings.Layer.WORKFLOW]
    assert diagnosis.findings[-1] is finding
    assert finding.to_dict()["learned"] is True


def test_a_verdict_from_learned_findings_alone_takes_the_calibrated_probability_as_its_confidence() -> None:
    from bot.diagnosis.classify import diagnose_observations

    diagnosis = diagnose_observations([_log(LEARNED_LINE)])
    finding = next(item for item in diagnosis.findings if item.learned)
    assert diagnosis.verdict.layer is findings.Layer.WORKFLOW
    assert diagnosis.verdict.confidence == round(finding.confidence, 2)
    assert "learned" in diagnosis.verdict.summary


def test_a_log_tail_line_no_rule_explains_is_classified_by_the_learned_model() -> None:
    from bot.diagnosis.classify import diagnose_observations

    tail = dataclasses.replace(text_observation(text=f"step 10 loss 2.31\n{LEARNED_LINE}\ndone"), kind="log_tail")
    diagnosis = diagnose_observations([tail])
    assert [item.rule for item in diagnosis.findings if item.learned] == ["learned.workflow"]


def test_a_caller_passing_its_own_rules_gets_rules_alone() -> None:
    from bot.diagnosis.classify import diagnose_observations, engine

    diagnosis = diagnose_observations([_log(LEARNED_LINE)], rules=engine.load())
    assert not [item for item in diagnosis.findings if item.learned]
    assert diagnosis.verdict.layer is None


def test_a_line_only_a_symptom_or_catch_all_rule_matches_gets_no_layer_from_it_but_keeps_its_next_step() -> None:
    result = hybrid.classify_text("Back-off restarting failed container")
    assert result.rule == "runtime.crashloop" and result.weak_rule is True
    assert result.layer is None or result.learned
    assert result.next


def test_a_rule_layer_the_model_rules_out_is_doubted_and_the_line_abstains_keeping_the_rule_and_its_next_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decided = hybrid.classify_text(UNHELD_RULE_LINE)
    assert decided.layer is findings.Layer.SCHEDULER and not decided.doubted and decided.rule
    monkeypatch.setattr(hybrid, "VETO_BELOW", 1.01)  # every layer is now under the bar: every rule is doubted

    result = hybrid.classify_text(UNHELD_RULE_LINE)

    assert result.doubted and result.weak_rule and result.layer is None and not result.learned
    assert result.rule == decided.rule and result.next == decided.next
    assert "does not decide" in result.title


def test_a_doubted_rule_on_a_line_the_corpus_holds_takes_the_corpus_label(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.diagnosis.classify import lines

    row = next(row for row in corpus.load() if row.layer and lines.classify_line(row.text).layer
               and hybrid.decisive(lines.classify_line(row.text)) and row.family == "kube-scheduler")
    monkeypatch.setattr(hybrid, "VETO_BELOW", 1.01)

    result = hybrid.classify_text(row.text)

    assert result.known and result.learned and result.layer is findings.Layer(row.layer)


def test_a_rule_the_model_does_not_rule_out_decides_and_the_bar_is_the_models_calibrated_probability() -> None:
    rule_class = learned.CLASSES.index("scheduler")
    probabilities = np.full(len(learned.CLASSES), 0.0)
    probabilities[rule_class] = hybrid.VETO_BELOW
    assert not hybrid.doubts(layer="scheduler", probabilities=probabilities)
    probabilities[rule_class] = hybrid.VETO_BELOW - 0.01
    assert hybrid.doubts(layer="scheduler", probabilities=probabilities)


def test_the_json_line_of_a_doubted_rule_says_doubted_and_weak_rule_with_a_null_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from handlers.cli import classify

    monkeypatch.setattr(hybrid, "VETO_BELOW", 1.01)
    row = json.loads(classify.render_line(text=UNHELD_RULE_LINE, output=classify.OutputFormat.JSON))
    assert row["layer"] is None and row["doubted"] is True and row["weak_rule"] is True and row["rule"]


def test_checking_a_rule_line_reads_the_scoring_arrays_only_and_the_labelled_lines_wait_for_first_use() -> None:
    model = learned.read()
    model.probabilities([UNHELD_RULE_LINE])
    assert "evidence" not in vars(model), "scoring a line read the labelled lines"
    (prediction,) = model.predict([LEARNED_LINE])
    assert "evidence" in vars(model) and len(prediction.nearest) == 3
