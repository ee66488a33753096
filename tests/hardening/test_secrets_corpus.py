"""The redaction catalogue against a corpus of real credential shapes, with a maintained detector set
(Yelp's detect-secrets plugins) as the oracle: whatever it finds in the corpus, redaction removes."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.evidence import detectors, redact

CORPUS = yaml.safe_load((Path(__file__).with_name("secrets_corpus.yaml")).read_text(encoding="utf-8"))
LEAKY: list[dict[str, Any]] = CORPUS["leaky"]


@pytest.mark.parametrize("sample", LEAKY, ids=[f"{item['detector']}: {item['text'][:40]}" for item in LEAKY])
def test_every_credential_shape_in_the_corpus_is_redacted(sample: dict[str, Any]) -> None:
    cleaned = redact.redact_text(sample["text"])
    for secret in sample["secrets"]:
        assert secret not in cleaned, cleaned
    assert redact.redact_text(cleaned) == cleaned  # idempotent


@pytest.mark.parametrize("text", CORPUS["innocuous"])
def test_look_alikes_in_the_corpus_are_left_as_they_were(text: str) -> None:
    assert redact.redact_text(text) == text


def test_every_catalogue_detector_has_corpus_samples_that_need_it() -> None:
    named = {item["detector"] for item in LEAKY}
    missing = [detector.name for detector in detectors.CATALOGUE if detector.name not in named]
    assert missing == []
    for detector in detectors.CATALOGUE:
        samples = [item["text"] for item in LEAKY if item["detector"] == detector.name]
        assert all(detector.pattern.search(text) for text in samples), detector.name


def _detect_secrets_plugins() -> list[Any]:
    """Every regex and keyword plugin detect-secrets ships (not entropy or IP heuristics)."""
    plugins_package = pytest.importorskip("detect_secrets.plugins")
    base = importlib.import_module("detect_secrets.plugins.base")
    skipped = {"HighEntropyStringsPlugin", "Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
    found = []
    for module_info in pkgutil.iter_modules(plugins_package.__path__):
        module = importlib.import_module(f"detect_secrets.plugins.{module_info.name}")
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, base.BasePlugin)
                and not inspect.isabstract(cls)
                and cls.__module__ == module.__name__
                and cls.__name__ not in skipped
            ):
                found.append(cls())
    return found


def test_whatever_detect_secrets_finds_in_the_corpus_is_gone_after_redaction() -> None:
    plugins = _detect_secrets_plugins()
    assert len(plugins) >= 20
    leaks = []
    for sample in LEAKY:
        cleaned = redact.redact_text(sample["text"])
        for line in sample["text"].splitlines():
            for plugin in plugins:
                for secret in plugin.analyze_string(line):
                    value = str(secret).strip(" \t'\"=:")
                    if len(value) >= 6 and value in cleaned:
                        leaks.append((type(plugin).__name__, value, cleaned))
    assert leaks == []


_WORDS = st.sampled_from(
    ["mysql", "-p", "-pX1", "-P3306", "curl", "-u", "a:b", "--user", "sshpass", "redis-cli", "-a", "docker",
     "login", "machine", "password", "pw", "[REDACTED]", "'q w'", "\n", "PGPASSWORD=x", "nvapi-", "x" * 30]
)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(_WORDS, max_size=30), separators=st.sampled_from([" ", "\t", " \n"]))
def test_command_line_redaction_is_idempotent_on_any_mix_of_its_words(words: list[str], separators: str) -> None:
    once = redact.redact_text(separators.join(words))
    assert redact.redact_text(once) == once
