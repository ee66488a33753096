"""Loads the labelled corpus (tests/corpus/messages.jsonl): real messages, their layer and their source."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tests.support.paths import CORPUS as CORPUS_DIR

CORPUS = CORPUS_DIR / "messages.jsonl"
SECOND_SET = CORPUS.with_name("holdout.jsonl")
LAYERS = ("scheduler", "runtime", "workflow", "fabric", None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Labelled:
    """One corpus line."""

    text: str
    layer: str | None
    source: str


def load_corpus(*, path: Path = CORPUS) -> list[Labelled]:
    """Every line, validated: known layer, non-empty text and source."""
    items = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        data = json.loads(raw)
        if data["layer"] not in LAYERS or not data["text"].strip() or not data["source"].strip():
            raise ValueError(f"{path.name}:{number}: bad corpus line")
        items.append(Labelled(text=data["text"], layer=data["layer"], source=data["source"]))
    return items
