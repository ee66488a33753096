"""The labelled corpus in one place: field/*.jsonl plus the two older files, validated row by row.

Training and the leave-one-family-out evaluation read it; the bot never needs it at runtime. The sealed families
in unseen/ are read only by `evaluate --unseen`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

LAYERS = ("scheduler", "runtime", "fabric", "workflow")
CORPUS_DIR = Path(__file__).resolve().parents[3] / "tests" / "corpus"
OLD_FILES = ("messages.jsonl", "holdout.jsonl")
# Sealed families: collected and labelled like the field corpus, but never trained on and never read to write a
# rule, so the shipped classifier's score on them stays a measurement from outside (evaluate --unseen).
UNSEEN_FOLDER = "unseen"
# The first corpus quoted five lines from the project's seeds; only those old rows may cite a seed.
SEED_SOURCES_ALLOWED = frozenset({"messages.jsonl"})


class CorpusError(ValueError):
    """A corpus row is malformed; the message names file:line and what is wrong."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """One labelled line: its text, layer (None = nothing the line alone can decide), tool family, source."""

    text: str
    layer: str | None
    family: str
    source: str
    origin: str


def _row(*, path: Path, number: int, raw: str) -> Row:
    """Parse and validate one JSON line, naming file:line on any fault."""
    where = f"{path.name}:{number}"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise CorpusError(f"{where}: not JSON ({error})") from error
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: a row must be a JSON object")
    text, layer = data.get("text"), data.get("layer")
    family, source = data.get("family"), data.get("source")
    if not isinstance(text, str) or not text.strip():
        raise CorpusError(f"{where}: text must be a non-empty string")
    if layer is not None and layer not in LAYERS:
        raise CorpusError(f"{where}: layer must be one of {LAYERS} or null, not {layer!r}")
    if not isinstance(family, str) or not family.strip():
        raise CorpusError(f"{where}: family must be a non-empty string")
    if not isinstance(source, str) or not source.strip():
        raise CorpusError(f"{where}: source must be a non-empty string")
    seed_ok = path.name in SEED_SOURCES_ALLOWED and path.parent.name != "field" and source.startswith("seed:")
    if not source.startswith("https://") and not seed_ok:
        raise CorpusError(f"{where}: source must be an https:// address, not {source[:60]!r}")
    return Row(text=text, layer=layer, family=family.strip(), source=source, origin=where)


def read_file(*, path: Path) -> list[Row]:
    """Every non-blank row of one JSONL file, validated."""
    rows = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if raw.strip():
            rows.append(_row(path=path, number=number, raw=raw))
    return rows


def corpus_files(*, directory: Path = CORPUS_DIR) -> list[Path]:
    """The old files and every field family file, in a fixed order."""
    old = [directory / name for name in OLD_FILES if (directory / name).exists()]
    return old + sorted((directory / "field").glob("*.jsonl"))


def unseen_files(*, directory: Path = CORPUS_DIR) -> list[Path]:
    """The sealed families' files (not part of load(): nothing trains on them or writes a rule from them)."""
    return sorted((directory / UNSEEN_FOLDER).glob("*.jsonl"))


def read_files(*, paths: Sequence[Path]) -> list[Row]:
    """Every row of several files, in order, validated (no de-duplication: each file is scored as it is)."""
    return [row for path in paths for row in read_file(path=path)]


def unseen(*, directory: Path = CORPUS_DIR) -> list[Row]:
    """The sealed families' rows."""
    return read_files(paths=unseen_files(directory=directory))


def load(*, directory: Path = CORPUS_DIR) -> list[Row]:
    """The whole labelled corpus; duplicate texts (up to whitespace) keep their first row (one line, one vote)."""
    seen: set[str] = set()
    rows = []
    for path in corpus_files(directory=directory):
        for row in read_file(path=path):
            key = " ".join(row.text.split())
            if key not in seen:
                seen.add(key)
                rows.append(row)
    return rows


def fingerprint(*, rows: list[Row]) -> str:
    """A hash of what training reads (text, layer, family), so a stale model artifact is detected."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps([row.text, row.layer, row.family]).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()
