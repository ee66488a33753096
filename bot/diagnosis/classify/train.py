"""Train the learned layer model from the corpus, reproducibly: `python -m bot.diagnosis.classify.train`.

scikit-learn is needed here only (never at inference). Steps: one feature space for the whole corpus;
leave-one-family-out fits give every line a held-out score; a temperature fitted on those calibrates the
probabilities and the per-layer abstention thresholds are chosen on them (evaluate.py); the final model is fitted on
every line and written to model.npz with the corpus hash, the labelled examples and a self-check.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression

from bot.diagnosis.classify import corpus, learned

MIN_DF = 2
C = 8.0
SEED = 0
TOLERANCE = 1e-3
CHECK_ROWS = 16
NEIGHBOUR_MAX_SHARE = 0.02
NEIGHBOUR_MIN_DF_CAP = 10
TEMPERATURES = tuple(float(value) for value in np.round(np.geomspace(0.25, 4.0, 49), 4))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Space:
    """Every feature any corpus line has, and each line's raw counts in that space."""

    vocabulary: learned.Vocabulary
    rows: np.ndarray
    cols: np.ndarray
    tallies: np.ndarray
    n_rows: int

    def matrix(self, *, idf: np.ndarray) -> sparse.csr_matrix:
        """Weighted features for every line under one idf (zero idf = feature not in that vocabulary)."""
        values = learned.weigh(rows=self.rows, cols=self.cols, tallies=self.tallies, idf=idf,
                               words_width=len(self.vocabulary.word_index), n_rows=self.n_rows)
        return sparse.csr_matrix((values, (self.rows, self.cols)), shape=(self.n_rows, self.vocabulary.size))

    def document_frequency(self, *, members: np.ndarray) -> np.ndarray:
        """How many of the member lines hold each feature."""
        chosen = members[self.rows]
        return np.bincount(self.cols[chosen], minlength=self.vocabulary.size).astype(np.float64)


def feature_space(*, texts: Sequence[str]) -> Space:
    """Collect the full vocabulary (sorted, so reproducible) and count every line in it."""
    normalised = [learned.normalise(text) for text in texts]
    word_set = sorted({feature for line in normalised for feature in learned.words(line)})
    _rows, codes = learned.char_codes(normalised)
    vocabulary = learned.Vocabulary(word_index={word: index for index, word in enumerate(word_set)},
                                    char_codes=np.unique(codes))
    rows, cols, tallies = learned.counts(normalised=normalised, vocabulary=vocabulary)
    return Space(vocabulary=vocabulary, rows=rows, cols=cols, tallies=tallies, n_rows=len(texts))


def idf_for(*, space: Space, members: np.ndarray) -> np.ndarray:
    """Smoothed idf over the member lines; features seen in fewer than MIN_DF of them get 0 (dropped)."""
    df = space.document_frequency(members=members)
    n = float(members.sum())
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    idf[df < MIN_DF] = 0.0
    return idf


def labels(rows: Sequence[corpus.Row]) -> np.ndarray:
    """Class index per row; null lines are a class of their own (the model learns what cannot decide)."""
    return np.array([learned.CLASSES.index(row.layer or "null") for row in rows], dtype=np.int64)


def fit(*, matrix: sparse.csr_matrix, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression, classes balanced; weights for every class (absent ones never win)."""
    model = LogisticRegression(C=C, class_weight="balanced", solver="saga", tol=TOLERANCE, max_iter=2000,
                               random_state=SEED)
    model.fit(matrix, y)
    coef = np.zeros((len(learned.CLASSES), matrix.shape[1]))
    intercept = np.full(len(learned.CLASSES), -1e3)
    for position, klass in enumerate(model.classes_):
        coef[klass] = model.coef_[position]
        intercept[klass] = model.intercept_[position]
    return coef, intercept


def fold_logits(*, space: Space, y: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Logits of the held lines from a model fitted on the others, over only the features the others keep
    (a feature with zero idf is zero on every line: dropping its column leaves the fit the same, only faster)."""
    idf = idf_for(space=space, members=~held)
    keep = idf > 0
    matrix = space.matrix(idf=idf)[:, keep]
    coef, intercept = fit(matrix=matrix[~held], y=y[~held])
    return np.asarray(matrix[held] @ coef.T) + intercept


# Each worker process receives the feature space once (not once per family).
_WORKER: dict[str, object] = {}


def _start_worker(space: Space, y: np.ndarray) -> None:
    _WORKER.update(space=space, y=y)


def _worker_fold(held: np.ndarray) -> np.ndarray:
    return fold_logits(space=_WORKER["space"], y=_WORKER["y"], held=held)  # type: ignore[arg-type]


def usable_cpus() -> int:
    """The CPUs this process may run on: the default number of processes for the per-family fits."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def out_of_family_logits(*, rows: Sequence[corpus.Row], space: Space, workers: int | None = None) -> np.ndarray:
    """Each line's logits from a model that never saw its family (vocabulary and idf included). The fits are
    independent and seeded, so they run in `workers` processes (default: one per CPU; 1 runs in-process) and
    give the same numbers in any order."""
    families = np.array([row.family for row in rows])
    y = labels(rows)
    folds = [families == family for family in sorted(set(families.tolist()))]
    logits = np.zeros((len(rows), len(learned.CLASSES)))
    count = min(workers or usable_cpus(), len(folds))
    if count <= 1:
        results = [fold_logits(space=space, y=y, held=held) for held in folds]
    else:
        import concurrent.futures
        import multiprocessing

        # forkserver, not fork: the caller may hold threads (a test's servers) whose locks a fork would copy.
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=count, mp_context=multiprocessing.get_context("forkserver"),
            initializer=_start_worker, initargs=(space, y),
        ) as pool:
            results = list(pool.map(_worker_fold, folds))
    for held, found in zip(folds, results, strict=True):
        logits[held] = found
    return logits


def temperature(*, logits: np.ndarray, y: np.ndarray) -> float:
    """The temperature that minimises held-out negative log-likelihood (calibration on unseen families)."""
    def loss(value: float) -> float:
        probabilities = learned.softmax(logits / value)
        return float(-np.log(np.clip(probabilities[np.arange(len(y)), y], 1e-12, None)).mean())

    return min(TEMPERATURES, key=loss)


def neighbour_index(*, matrix: sparse.csr_matrix, words_width: int) -> tuple[np.ndarray, ...]:
    """Column-major word block of the examples, for cosine nearest-example look-ups at inference.

    Words in more than NEIGHBOUR_MAX_SHARE of the examples are left out of the index: their idf weight is
    low, so they hardly move the ranking, and they are most of the look-up's work.
    """
    block = sparse.csc_matrix(matrix[:, :words_width])
    block.sort_indices()
    common = np.diff(block.indptr) > max(NEIGHBOUR_MIN_DF_CAP, NEIGHBOUR_MAX_SHARE * matrix.shape[0])
    block = block @ sparse.diags((~common).astype(np.float64))
    block = sparse.csc_matrix(block)
    block.eliminate_zeros()
    block.sort_indices()
    return block.indptr.astype(np.int32), block.indices.astype(np.int32), block.data.astype(np.float32)


def _blob(strings: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode("utf-8"), dtype=np.uint8)


def build(
    *, rows: Sequence[corpus.Row], thresholds: Sequence[float] | None = None, workers: int | None = None,
) -> dict[str, np.ndarray]:
    """Every array of the artifact, from the corpus alone (deterministic)."""
    from bot.diagnosis.classify import evaluate

    texts = [" ".join(row.text.split()) for row in rows]
    space = feature_space(texts=texts)
    y = labels(rows)
    held_out = out_of_family_logits(rows=rows, space=space, workers=workers)
    scale = temperature(logits=held_out, y=y)
    if thresholds is None:
        thresholds = evaluate.choose_thresholds(rule_found=evaluate.rule_layers(rows=rows, held_out=True), y=y,
                                                probabilities=learned.softmax(held_out / scale),
                                                known=evaluate.known_layers(rows=rows, held_out=True))
    idf = idf_for(space=space, members=np.ones(len(rows), dtype=bool))
    keep = idf > 0
    words_width = int(keep[: len(space.vocabulary.word_index)].sum())
    matrix = space.matrix(idf=idf)[:, keep]
    coef, intercept = fit(matrix=matrix, y=y)
    coef32 = coef.astype(np.float32)
    check = np.asarray(matrix[:CHECK_ROWS] @ coef32.T.astype(np.float64)) + intercept
    word_list = sorted(space.vocabulary.word_index, key=space.vocabulary.word_index.__getitem__)
    kept_words = [word for word, used in zip(word_list, keep[: len(word_list)], strict=True) if used]
    indptr, neighbour_rows, neighbour_values = neighbour_index(matrix=matrix, words_width=words_width)
    return {
        "word_vocab": _blob(kept_words),
        "char_vocab": space.vocabulary.char_codes[keep[len(word_list):]],
        "idf": idf[keep].astype(np.float32),
        "coef": coef32,
        "intercept": intercept.astype(np.float32),
        "temperature": np.array(scale, dtype=np.float64),
        "thresholds": np.round(np.asarray(thresholds, dtype=np.float64), 3),
        "corpus_hash": np.frombuffer(corpus.fingerprint(rows=list(rows)).encode("ascii"), dtype=np.uint8),
        "example_texts": _blob(texts),
        "example_layers": y.astype(np.int8),
        "example_families": _blob([row.family for row in rows]),
        "neighbour_indptr": indptr,
        "neighbour_rows": neighbour_rows,
        "neighbour_values": neighbour_values,
        "check_logits": check.astype(np.float32),
    }


def _positive(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes, at least 1 (got {text!r})")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    """Train on the whole corpus and write the artifact; prints what it did."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=learned.MODEL_PATH)
    parser.add_argument("--corpus", type=Path, default=corpus.CORPUS_DIR, help="folder of the labelled corpus")
    parser.add_argument("--workers", type=_positive, default=None,
                        help="processes for the per-family fits (default: one per CPU; 1 runs them in-process)")
    args = parser.parse_args(argv)
    from bot.diagnosis.classify import evaluate

    rows = corpus.load(directory=args.corpus)
    arrays = build(rows=rows, workers=args.workers)
    learned.write(path=args.output, arrays=arrays)
    families = len({row.family for row in rows})
    print(f"trained on {len(rows)} lines from {families} families; temperature {float(arrays['temperature']):.3f},"
          f" thresholds {evaluate.describe(arrays['thresholds'].tolist())}; wrote {args.output} ({args.output.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
