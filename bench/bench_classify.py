"""Classifier benchmark: layer accuracy per layer, confusion matrix, and throughput on the labelled corpus.

Run: PYTHONPATH=. python3 bench/bench_classify.py [--repeat N]
Prints figures only; the >= 95% accuracy gate lives in tests/bot/diagnosis/classify/test_corpus_accuracy.py.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from bot.diagnosis.classify import classify_line, diagnose_observations
from bot.diagnosis.classify.lines import classify_line_plain, classify_lines, text_observation

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "corpus"
LABELS = ("scheduler", "runtime", "workflow", "fabric", None)


def _name(label: str | None) -> str:
    return label or "null"


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _report(*, title: str, rows: list[dict]) -> None:
    confusion: dict[tuple[str | None, str | None], int] = collections.Counter()
    from bot.diagnosis.classify import hybrid

    for result, row in zip(hybrid.classify_texts([row["text"] for row in rows]), rows, strict=True):
        confusion[(row["layer"], result.layer.value if result.layer else None)] += 1
    total = len(rows)
    right = sum(count for (want, got), count in confusion.items() if want == got)
    print(f"\n== {title}: {total} lines, layer accuracy {right / total:.1%} ({right}/{total})")
    for label in LABELS:
        support = sum(count for (want, _), count in confusion.items() if want == label)
        hits = confusion[(label, label)]
        if support:
            print(f"   {_name(label):<10} {hits:>4}/{support:<4} {hits / support:.1%}")
    print("   confusion (rows = labelled, columns = classified):")
    print("   " + " " * 11 + "".join(f"{_name(label):>10}" for label in LABELS))
    for want in LABELS:
        print("   " + f"{_name(want):<11}" + "".join(f"{confusion[(want, got)]:>10}" for got in LABELS))


RULES_TARGET_LINES_PER_S = 50_000  # issue 12: the rules path on one core of this machine


def _all_corpus_texts() -> list[str]:
    """Every labelled line: messages, holdout and the field sets (tests/corpus/field/*.jsonl) when present."""
    paths = sorted(CORPUS_DIR.glob("*.jsonl")) + sorted(CORPUS_DIR.glob("field/*.jsonl"))
    return [row["text"] for path in paths for row in _load(path) if isinstance(row.get("text"), str)]


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>10,.0f} lines/s  ({count / seconds / RULES_TARGET_LINES_PER_S:.2f}x the 50,000 target)"


def _rules_throughput(*, repeat: int) -> None:
    """Rules path lines/s: one line at a time, the batch API, the plain full scan, and one snapshot."""
    distinct = _all_corpus_texts()
    texts = distinct * repeat
    classify_lines(distinct)  # warm: the catalogue, its prefilter index and the alternatives' regexes
    started = time.perf_counter()
    for text in texts:
        classify_line(text)
    single = time.perf_counter() - started
    started = time.perf_counter()
    classify_lines(texts)
    batch = time.perf_counter() - started
    sample = distinct[: max(1, len(distinct) // 4)]
    started = time.perf_counter()
    for text in sample:
        classify_line_plain(text)
    plain = time.perf_counter() - started
    observations = [text_observation(text=text) for text in texts]
    started = time.perf_counter()
    diagnose_observations(observations)
    snapshot = time.perf_counter() - started
    print(f"\n== rules throughput over {len(texts)} lines ({len(distinct)} distinct corpus lines x {repeat})")
    print(f"   classify_line (one at a time):   {_rate(len(texts), single)}")
    print(f"   classify_lines (batch):          {_rate(len(texts), batch)}")
    print(f"   plain full scan (no prefilter):  {_rate(len(sample), plain)}  on {len(sample)} lines")
    print(f"   diagnose_observations:           {len(texts) / snapshot:>10,.0f} observations/s (one snapshot)")


LEARNED_TARGET_LINES_PER_S = 5_000  # issue 12: the learned path, batch


def _learned_throughput(*, repeat: int) -> None:
    """Learned path lines/s (numpy only): features + calibrated probabilities, then with nearest examples."""
    from bot.diagnosis.classify import hybrid, learned

    model = learned.model()
    texts = _all_corpus_texts() * repeat
    model.predict(texts[:512])  # warm: the artifact is read once
    started = time.perf_counter()
    model.predict(texts, with_nearest=False)
    plain = time.perf_counter() - started
    started = time.perf_counter()
    model.predict(texts)
    nearest = time.perf_counter() - started
    started = time.perf_counter()
    hybrid.classify_texts(texts)
    both = time.perf_counter() - started
    print(f"\n== learned throughput over {len(texts)} lines (target {LEARNED_TARGET_LINES_PER_S:,} lines/s, batch)")
    print(f"   probabilities only:              {len(texts) / plain:>10,.0f} lines/s")
    print(f"   with 3 nearest examples:         {len(texts) / nearest:>10,.0f} lines/s")
    print(f"   hybrid classify_texts (batch):   {len(texts) / both:>10,.0f} lines/s (rules, then learned for the rest)")


def _leave_one_family_out() -> None:
    """The honest figures: per held-out family, with rules derived only from it switched off."""
    from bot.diagnosis.classify import evaluate

    started = time.perf_counter()
    result = evaluate.run()
    seconds = time.perf_counter() - started
    held, inside, rules_only = result.held_out, result.in_sample, result.rules_only_held_out
    lines = sum(item.lines for item in held.families)
    print(f"\n== leave-one-family-out over {len(held.families)} families, {lines} lines ({seconds:.0f} s),"
          f" thresholds {evaluate.describe(held.thresholds)}")
    print("   (mean over families)            accuracy  abstained  confidently-wrong")
    for title, score in (("hybrid, held-out family", held), ("rules alone, held-out family", rules_only),
                         ("hybrid, in-sample corpus", inside)):
        print(f"   {title:<32}{score.accuracy:>8.1%}{score.abstained:>11.1%}{score.confidently_wrong:>19.1%}")
    print(f"   line-weighted held-out: accuracy {held.line_accuracy:.1%}, confidently wrong"
          f" {held.line_confidently_wrong:.1%}")
    print("   held-out calibration (mean top probability -> accuracy, lines): " + ", ".join(
        f"{mean:.2f}->{right:.2f} ({count})" for mean, right, count in result.reliability))
    print("   family                          lines  accuracy  abstained  conf-wrong  by-rules  by-model")
    for item in sorted(held.families, key=lambda family: family.accuracy):
        print(f"   {item.family:<30}{item.lines:>7}{item.accuracy:>10.0%}{item.abstained:>11.0%}"
              f"{item.confidently_wrong:>12.0%}{item.by_rules:>10.0%}{item.by_model:>10.0%}")
    from bot.diagnosis.classify import corpus

    sealed_rows = corpus.unseen()
    if sealed_rows:
        sealed = evaluate.unseen(rows=sealed_rows)
        print(f"\n== sealed families (tests/corpus/unseen: never trained on, no rule written from them):"
              f" {len(sealed.families)} families, {len(sealed_rows)} lines")
        print(f"   shipped classifier: accuracy {sealed.accuracy:.1%}, abstained {sealed.abstained:.1%},"
              f" confidently wrong {sealed.confidently_wrong:.1%} (mean over families)")


def main() -> None:
    """Print the figures for every corpus file present."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="corpus repetitions for the throughput run")
    args = parser.parse_args()
    corpus = _load(CORPUS_DIR / "messages.jsonl")
    _report(title="corpus (messages.jsonl, used to write the rules; rules then the learned model, in sample)", rows=corpus)
    holdout_path = CORPUS_DIR / "holdout.jsonl"
    if holdout_path.exists():
        _report(
            title="second set (holdout.jsonl: gathered after the rules were written; it scored 77.1% (27/35,"
            " 0 guesses on null lines) before the rules were generalised from its misses)",
            rows=_load(holdout_path),
        )
    _rules_throughput(repeat=args.repeat)
    _learned_throughput(repeat=args.repeat)
    _leave_one_family_out()


if __name__ == "__main__":
    main()
