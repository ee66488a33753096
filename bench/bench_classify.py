"""Classifier benchmark: layer accuracy per layer, confusion matrix, and throughput on the labelled corpus.

Run: PYTHONPATH=. python3 bench/bench_classify.py [--repeat N]
Prints figures only; the >= 95% accuracy gate lives in tests/classify/test_corpus_accuracy.py.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from bot.diagnosis.classify import classify_line, diagnose_observations
from bot.diagnosis.classify.lines import text_observation

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "corpus"
LABELS = ("scheduler", "runtime", "workflow", "fabric", None)


def _name(label: str | None) -> str:
    return label or "null"


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _report(*, title: str, rows: list[dict]) -> None:
    confusion: dict[tuple[str | None, str | None], int] = collections.Counter()
    for row in rows:
        result = classify_line(row["text"])
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


def _throughput(*, rows: list[dict], repeat: int) -> None:
    texts = [row["text"] for row in rows] * repeat
    started = time.perf_counter()
    for text in texts:
        classify_line(text)
    line_seconds = time.perf_counter() - started
    observations = [text_observation(text=text) for text in texts]
    started = time.perf_counter()
    diagnose_observations(observations)
    batch_seconds = time.perf_counter() - started
    print(f"\n== throughput over {len(texts)} lines")
    print(f"   classify_line:          {len(texts) / line_seconds:,.0f} lines/s")
    print(f"   diagnose_observations:  {len(texts) / batch_seconds:,.0f} observations/s (one snapshot)")


def main() -> None:
    """Print the figures for every corpus file present."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20, help="corpus repetitions for the throughput run")
    args = parser.parse_args()
    corpus = _load(CORPUS_DIR / "messages.jsonl")
    _report(title="corpus (messages.jsonl, used to write the rules)", rows=corpus)
    holdout_path = CORPUS_DIR / "holdout.jsonl"
    if holdout_path.exists():
        _report(
            title="second set (holdout.jsonl: gathered after the rules were written; it scored 77.1% (27/35,"
            " 0 guesses on null lines) before the rules were generalised from its misses)",
            rows=_load(holdout_path),
        )
    _throughput(rows=corpus, repeat=args.repeat)


if __name__ == "__main__":
    main()
