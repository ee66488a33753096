"""The learned layer model at inference time: numpy only (never scikit-learn), loaded on first use.

A line the labelled corpus already holds (the same text once numbers, ids and addresses are folded) is a
known line: it takes the corpus's label (null included: the corpus says that line alone cannot decide) with
that row as its evidence, before the linear model is asked.

Features are the same for training (train.py) and here, because both call the functions below: a line is
lower-cased, long lines keep their head and tail, hex, ids and digits are folded, then it becomes word
unigrams and bigrams plus byte 3-, 4- and 5-grams (exact, packed into integers, so no hashing collisions).
Each block is TF-IDF weighted (1 + log tf) and L2-normalised, the two blocks weighing the same.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bot.evidence import findings

CLASSES = ("scheduler", "runtime", "fabric", "workflow", "null")
NULL_CLASS = CLASSES.index("null")
CHAR_SIZES = (3, 4, 5)
HEAD_CHARS = 480
TAIL_CHARS = 160
MODEL_PATH = Path(__file__).with_name("model.npz")
BATCH = 512
# What scoring a line needs; the rest of the artifact (labelled lines, neighbour index) is read on first use.
SCORING_ARRAYS = ("word_vocab", "char_vocab", "idf", "coef", "intercept", "temperature", "thresholds",
                  "corpus_hash", "check_logits")
# Stored without compression: the weights hardly compress (float32, 14%) and inflating them is start-up time.
UNCOMPRESSED_ARRAYS = frozenset({"coef"})
# A known line's confidence: the corpus label, which held out agreed on every line another family repeated.
KNOWN_CONFIDENCE = 0.95
_HEX = re.compile(r"0x[0-9a-f]+")
_ID = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[a-z_][a-z0-9_]+")
_BLOCK_SCALE = float(np.sqrt(0.5))


def normalise(text: str) -> str:
    """Lower-case, head and tail of long lines, numbers/ids/addresses folded, one space between words."""
    line = " ".join(text.lower().split())
    if len(line) > HEAD_CHARS + TAIL_CHARS:
        line = f"{line[:HEAD_CHARS]} {line[-TAIL_CHARS:]}"
    return _DIGITS.sub("0", _ID.sub("#", _HEX.sub("0x", line)))


def words(normalised: str) -> list[str]:
    """Word unigrams and bigrams (a bigram holds one space; a unigram none)."""
    tokens = _WORD.findall(normalised)
    return tokens + [f"{left} {right}" for left, right in itertools.pairwise(tokens)]


def char_codes(normalised: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every byte n-gram of every line as (row, code): the bytes packed into one integer, n in the top byte."""
    parts = [f" {line} ".encode() for line in normalised]
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    lengths = np.fromiter((len(part) for part in parts), dtype=np.int64, count=len(parts))
    data = np.frombuffer(b"".join(parts), dtype=np.uint8).astype(np.uint64)
    row_of = np.repeat(np.arange(len(parts), dtype=np.int64), lengths)
    room = np.repeat(np.cumsum(lengths), lengths) - np.arange(len(data), dtype=np.int64)
    rows, codes = [], []
    for size in CHAR_SIZES:
        count = len(data) - size + 1
        if count <= 0:
            continue
        code = np.full(count, size, dtype=np.uint64)
        for offset in range(size):
            code = (code << np.uint64(8)) | data[offset : offset + count]
        keep = room[:count] >= size
        rows.append(row_of[:count][keep])
        codes.append(code[keep])
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    return np.concatenate(rows), np.concatenate(codes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Vocabulary:
    """Feature names: word features first (0..W-1), then byte n-gram codes (sorted) after them."""

    word_index: dict[str, int]
    char_codes: np.ndarray

    @property
    def size(self) -> int:
        """How many features."""
        return len(self.word_index) + len(self.char_codes)


def counts(*, normalised: Sequence[str], vocabulary: Vocabulary) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw feature counts of lines already through normalise(), as (row, column, count) triplets sorted by row
    then column (callers fold each line once and keep it for the known-line look-up too)."""
    word_rows: list[int] = []
    word_cols: list[int] = []
    index = vocabulary.word_index
    for row, line in enumerate(normalised):
        found = [column for column in map(index.get, words(line)) if column is not None]
        word_rows.extend([row] * len(found))
        word_cols.extend(found)
    rows, codes = char_codes(normalised)
    known = vocabulary.char_codes
    where = np.searchsorted(known, codes)
    hit = where < len(known)
    hit[hit] = known[where[hit]] == codes[hit]
    all_rows = np.concatenate([np.asarray(word_rows, np.int64), rows[hit]])
    all_cols = np.concatenate([np.asarray(word_cols, np.int64), where[hit] + len(index)])
    width = np.int64(max(vocabulary.size, 1))
    keys, tallies = np.unique(all_rows * width + all_cols, return_counts=True)
    return keys // width, keys % width, tallies.astype(np.float64)


def weigh(
    *, rows: np.ndarray, cols: np.ndarray, tallies: np.ndarray, idf: np.ndarray, words_width: int, n_rows: int
) -> np.ndarray:
    """TF-IDF values for the triplets: (1 + log tf) * idf, each row's word and byte blocks L2-normalised."""
    values = (1.0 + np.log(tallies)) * idf[cols]
    block = (cols >= words_width).astype(np.int64)
    slot = rows * 2 + block
    norms = np.sqrt(np.bincount(slot, weights=values * values, minlength=2 * n_rows))
    scale = np.where(norms > 0, _BLOCK_SCALE / np.where(norms > 0, norms, 1.0), 0.0)
    return values * scale[slot]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prediction:
    """Calibrated class probabilities for one line, and the layer they give (None = abstain)."""

    layer: str | None
    probability: float
    probabilities: dict[str, float]
    nearest: tuple[findings.LabelledExample, ...] = ()
    # The corpus holds this line (up to folded numbers and ids): `layer` is its label, `nearest[0]` its row.
    known: bool = False


def _strings(blob: np.ndarray) -> list[str]:
    """Strings stored as one UTF-8 byte array joined by newlines (no pickles in the artifact)."""
    text = blob.tobytes().decode("utf-8")
    return text.split("\n") if text else []


@dataclasses.dataclass(frozen=True, kw_only=True)
class Evidence:
    """The labelled lines and their word-block index: read only when a line needs nearest examples or the
    known-line look-up (a rule line the model merely checks never does)."""

    examples: tuple[findings.LabelledExample, ...]
    neighbour_indptr: np.ndarray
    neighbour_rows: np.ndarray
    neighbour_values: np.ndarray


@dataclasses.dataclass(frozen=True, kw_only=True)
class Model:
    """The trained artifact: vocabulary, idf, linear weights, calibration, thresholds and labelled examples."""

    vocabulary: Vocabulary
    idf: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    temperature: float
    # Per class (CLASSES order): the calibrated probability at or above which the model names that layer.
    thresholds: tuple[float, ...]
    corpus_hash: str
    check_logits: np.ndarray
    load_evidence: Callable[[], Evidence]

    @functools.cached_property
    def evidence(self) -> Evidence:
        """The labelled lines and neighbour index, read on first use."""
        return self.load_evidence()

    @property
    def examples(self) -> tuple[findings.LabelledExample, ...]:
        """The labelled corpus lines the model was trained on (CLASSES order of layers, null as None)."""
        return self.evidence.examples

    @functools.cached_property
    def known(self) -> dict[str, int]:
        """Folded text of every labelled line -> the index of its example; lines the corpus labels differently
        once folded map to -1 (the corpus disagrees with itself, so the line alone cannot decide)."""
        return known_lines([(normalise(example.text), example.layer) for example in self.examples])

    @property
    def words_width(self) -> int:
        """Where byte n-gram features start."""
        return len(self.vocabulary.word_index)

    def features(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Weighted sparse features (row, column, value) for a batch."""
        return self._features([normalise(text) for text in texts])

    def _features(self, normalised: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows, cols, tallies = counts(normalised=normalised, vocabulary=self.vocabulary)
        values = weigh(rows=rows, cols=cols, tallies=tallies, idf=self.idf, words_width=self.words_width,
                       n_rows=len(normalised))
        return rows, cols, values

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        """Uncalibrated class scores (n, classes): one sparse-dense product."""
        return self._logits(self.features(texts), n_rows=len(texts))

    def _logits(self, features: tuple[np.ndarray, np.ndarray, np.ndarray], *, n_rows: int) -> np.ndarray:
        rows, cols, values = features
        scores = np.empty((n_rows, len(CLASSES)))
        for klass in range(len(CLASSES)):
            scores[:, klass] = np.bincount(rows, weights=values * self.coef[klass, cols], minlength=n_rows)
        return scores + self.intercept

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Calibrated probabilities: softmax of the logits divided by the fitted temperature."""
        return softmax(self.logits(texts) / self.temperature)

    def nearest(self, texts: Sequence[str], *, k: int = 3) -> list[tuple[findings.LabelledExample, ...]]:
        """The k labelled examples closest to each line (cosine over the word block)."""
        return self._nearest(self.features(texts), n_rows=len(texts), k=k)

    def _nearest(
        self, features: tuple[np.ndarray, np.ndarray, np.ndarray], *, n_rows: int, k: int = 3
    ) -> list[tuple[findings.LabelledExample, ...]]:
        rows, cols, values = features
        words_only = cols < self.words_width
        rows, cols, values = rows[words_only], cols[words_only], values[words_only]
        index = self.evidence
        starts = index.neighbour_indptr[cols]
        spans = index.neighbour_indptr[cols + 1] - starts
        total = int(spans.sum())
        result: list[tuple[findings.LabelledExample, ...]] = [() for _ in range(n_rows)]
        if total == 0:
            return result
        offsets = np.repeat(np.cumsum(spans) - spans, spans)
        gather = np.repeat(starts, spans) + (np.arange(total) - offsets)
        query = np.repeat(rows, spans)
        products = np.repeat(values, spans) * index.neighbour_values[gather]
        n_examples = len(index.examples)
        scores = np.bincount(query * n_examples + index.neighbour_rows[gather], weights=products,
                             minlength=n_rows * n_examples).reshape(n_rows, n_examples)
        # Top k by k arg-maxes (each a cheap pass; ties go to the lower index): k is small, a partition is not.
        every = np.arange(n_rows)
        picked, best = [], []
        for _rank in range(min(k, n_examples)):
            column = scores.argmax(axis=1)
            picked.append(column)
            best.append(scores[every, column])
            scores[every, column] = -np.inf
        for row in range(n_rows):
            result[row] = tuple(index.examples[int(column[row])] for column, value in zip(picked, best, strict=True)
                                if value[row] > 0)
        return result

    def predict(self, texts: Sequence[str], *, with_nearest: bool = True) -> list[Prediction]:
        """Layer per line (None when the null class wins or the top probability is under its class's threshold)."""
        predictions: list[Prediction] = []
        for start in range(0, len(texts), BATCH):
            chunk = list(texts[start : start + BATCH])
            folded = [normalise(text) for text in chunk]
            features = self._features(folded)
            probabilities = softmax(self._logits(features, n_rows=len(chunk)) / self.temperature)
            nearest = self._nearest(features, n_rows=len(chunk)) if with_nearest else [() for _ in chunk]
            best = probabilities.argmax(axis=1)
            for row, klass in enumerate(best):
                if (index := self.known.get(folded[row])) is not None:
                    predictions.append(self._known(index=index, nearest=nearest[row]))
                    continue
                top = float(probabilities[row, klass])
                layer = CLASSES[klass] if names_layer(klass=int(klass), probability=top,
                                                      thresholds=self.thresholds) else None
                predictions.append(Prediction(
                    layer=layer,
                    probability=round(top, 3),
                    probabilities={name: round(float(p), 3) for name, p in zip(CLASSES, probabilities[row],
                                                                               strict=True)},
                    nearest=nearest[row],
                ))
        return predictions

    def _known(self, *, index: int, nearest: tuple[findings.LabelledExample, ...]) -> Prediction:
        """The corpus's own answer for a line it holds; -1 (labels that disagree) abstains."""
        if index < 0:
            return Prediction(layer=None, probability=KNOWN_CONFIDENCE, probabilities={}, nearest=nearest,
                              known=True)
        example = self.examples[index]
        others = tuple(item for item in nearest if item != example)[:2]
        return Prediction(layer=example.layer, probability=KNOWN_CONFIDENCE,
                          probabilities={name: KNOWN_CONFIDENCE if name == (example.layer or "null") else 0.0
                                         for name in CLASSES},
                          nearest=(example, *others), known=True)


def known_lines(folded: Sequence[tuple[str, str | None]]) -> dict[str, int]:
    """Folded text -> index of the first row holding it, or -1 when rows holding it disagree on the layer."""
    table: dict[str, int] = {}
    for index, (text, layer) in enumerate(folded):
        first = table.get(text)
        if first is None:
            table[text] = index
        elif first >= 0 and folded[first][1] != layer:
            table[text] = -1
    return table


def names_layer(*, klass: int, probability: float, thresholds: Sequence[float]) -> bool:
    """Whether a top class and its probability name a layer: never the null class, else at its threshold."""
    return klass != NULL_CLASS and probability >= thresholds[klass]


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large scores."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def read(*, path: Path = MODEL_PATH) -> Model:
    """Load an artifact written by train.py (plain arrays, no pickles); the labelled lines wait for first use."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in SCORING_ARRAYS}
    words_list = _strings(arrays["word_vocab"])
    return Model(
        vocabulary=Vocabulary(word_index={word: index for index, word in enumerate(words_list)},
                              char_codes=arrays["char_vocab"]),
        idf=arrays["idf"].astype(np.float64),
        coef=arrays["coef"].astype(np.float64),
        intercept=arrays["intercept"].astype(np.float64),
        temperature=float(arrays["temperature"]),
        thresholds=tuple(float(value) for value in arrays["thresholds"]),
        corpus_hash=arrays["corpus_hash"].tobytes().decode("ascii"),
        check_logits=arrays["check_logits"].astype(np.float64),
        load_evidence=functools.partial(read_evidence, path=path),
    )


def read_evidence(*, path: Path) -> Evidence:
    """The labelled lines and the nearest-example index of an artifact."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files if name not in SCORING_ARRAYS}
    layers = [None if index == NULL_CLASS else CLASSES[index] for index in arrays["example_layers"].tolist()]
    examples = tuple(
        findings.LabelledExample(text=text, layer=layer, family=family)
        for text, layer, family in zip(_strings(arrays["example_texts"]), layers,
                                       _strings(arrays["example_families"]), strict=True)
    )
    return Evidence(
        examples=examples,
        neighbour_indptr=arrays["neighbour_indptr"].astype(np.int64),
        neighbour_rows=arrays["neighbour_rows"].astype(np.int64),
        neighbour_values=arrays["neighbour_values"].astype(np.float64),
    )


@functools.cache
def model() -> Model:
    """The packaged artifact, read once per process."""
    return read()


def write(*, path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays as an .npz byte-for-byte reproducibly (fixed entry order and timestamps)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.require(arrays[name], requirements="C"), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if name in UNCOMPRESSED_ARRAYS else zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue())
    path.write_bytes(buffer.getvalue())
