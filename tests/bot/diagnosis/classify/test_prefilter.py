"""The literal prefilter is an optimisation only: every verdict equals the plain scan of every rule's regex."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.diagnosis.classify import catalogue, lines, matching, prefilter
from bot.evidence import findings
from tests.support.paths import CORPUS

CORPUS_DIR = CORPUS
RULES = catalogue.load_rules()
INDEX = prefilter.for_rules(RULES)
NEEDLES = sorted({needle for item in INDEX.text.alternatives for needle in item.needles})
KINDS = sorted({kind for rule in RULES for item in rule.structured for kind in item.kinds} | {"text", "log_line"})
FIELD_VALUES = sorted(
    {value for rule in RULES for item in rule.structured for field in item.fields for value in field.values}
)
# Characters the regex engine folds onto ASCII letters, a few that str.lower() widens or changes, and the
# window's own ellipsis: the places where a prefilter built on lower-casing could go wrong.
AWKWARD = ["İ", "ı", "ſ", "K", "Σ", "ß", "ﬁ", "…", "\u0307", "\x00", "\ud800", "é", "µ"]


def _corpus_texts() -> list[str]:
    """Every string in every corpus row (the labelled sets and the field sets other people keep adding)."""
    texts: list[str] = []
    for path in sorted(CORPUS_DIR.glob("*.jsonl")) + sorted(CORPUS_DIR.glob("field/*.jsonl")):
        for raw in path.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                row = json.loads(raw)
                texts.extend(value for value in row.values() if isinstance(value, str))
    return texts


# Letters spelt with the non-ASCII characters the regex engine still matches to them case-insensitively.
LOOKALIKES = str.maketrans({"i": "İ", "I": "ı", "s": "ſ", "k": "K"})


def _mangle(text: str, *, seed: int) -> str:
    """A case-changed or look-alike-spelt, lightly edited copy, so lines near the corpus lines are checked too."""
    changed = [text.swapcase(), text.upper(), text.translate(LOOKALIKES), text][seed % 4]
    return changed[: max(0, len(changed) - seed % 7)] + AWKWARD[seed % len(AWKWARD)]


def test_every_corpus_line_gets_the_same_verdict_from_the_prefilter_as_from_the_full_scan() -> None:
    texts = _corpus_texts()
    assert len(texts) > 200
    for number, text in enumerate(texts):
        for variant in (text, _mangle(text, seed=number)):
            assert lines.classify_line(variant) == lines.classify_line_plain(variant), variant


def test_the_batch_api_answers_exactly_what_one_line_at_a_time_does() -> None:
    texts = _corpus_texts()[:300] + ["", "   ", "nothing to see here"]
    assert lines.classify_lines(texts) == [lines.classify_line_plain(text) for text in texts]


def _observation(*, kind: str, text: str, fields: dict[str, object]) -> findings.Observation:
    return findings.Observation(
        source="test", kind=kind, subject="pod/x", text=text, command="", observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        fields=fields,
    )


def test_every_corpus_line_as_a_snapshot_observation_matches_the_same_rules_as_the_full_scan() -> None:
    for number, text in enumerate(_corpus_texts()):
        kind = KINDS[number % len(KINDS)]
        fields = {"reason": FIELD_VALUES[number % len(FIELD_VALUES)], "message": text[: number % 40]}
        observation = _observation(kind=kind, text=text, fields=fields)
        assert matching.best_matches(rules=RULES, observation=observation) == matching.full_scan(
            rules=RULES, observation=observation
        )


_fragment = st.one_of(
    st.sampled_from(NEEDLES),
    st.sampled_from(NEEDLES).map(str.upper),
    st.sampled_from(NEEDLES).map(lambda needle: needle.translate(LOOKALIKES)),
    st.sampled_from(AWKWARD),
    st.sampled_from([" ", ": ", "/", "=", "(", ")", "|", "'", '"', "\n", "0/16 nodes are available: ", "Xid 79"]),
    st.integers(min_value=0, max_value=300).map(str),
    st.text(max_size=12),
)
_line = st.lists(_fragment, max_size=14).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_line, swap=st.booleans())
def test_generated_lines_get_the_same_verdict_from_the_prefilter_as_from_the_full_scan(
    text: str, swap: bool
) -> None:
    line = text.swapcase() if swap else text
    assert lines.classify_line(line) == lines.classify_line_plain(line)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_line,
    kind=st.sampled_from(KINDS),
    reason=st.sampled_from(FIELD_VALUES or ["x"]),
    message=_line,
    extra=st.dictionaries(st.sampled_from(["exit_code", "status", "state", "error", "count"]), st.integers(-2, 200)),
)
def test_generated_observations_match_the_same_rules_through_the_prefilter_as_through_the_full_scan(
    text: str, kind: str, reason: str, message: str, extra: dict[str, int]
) -> None:
    observation = _observation(kind=kind, text=text, fields={"reason": reason, "message": message, **extra})
    assert matching.best_matches(rules=RULES, observation=observation) == matching.full_scan(
        rules=RULES, observation=observation
    )


def test_a_huge_line_is_read_through_the_same_bounded_window_by_both_paths() -> None:
    filler = "x" * (matching.MATCH_HEAD_CHARS * 40)
    hidden = f"{filler} CUDA out of memory {filler}"
    at_the_end = f"{filler} CUDA out of memory"
    assert lines.classify_line(hidden) == lines.classify_line_plain(hidden)
    assert lines.classify_line(hidden).rule is None
    assert lines.classify_line(at_the_end) == lines.classify_line_plain(at_the_end)
    assert lines.classify_line(at_the_end).rule == "runtime.cuda-oom"


def test_fold_fixes_are_exactly_the_non_ascii_characters_the_regex_engine_matches_to_ascii_letters() -> None:
    ascii_class = re.compile("[\x00-\x7f]", re.IGNORECASE)
    found = {}
    for code in range(0x80, sys.maxunicode + 1):
        char = chr(code)
        if ascii_class.fullmatch(char) or any(ord(item) < 0x80 for item in char.lower()):
            found[code] = next(
                letter for letter in "abcdefghijklmnopqrstuvwxyz" if re.fullmatch(letter, char, re.IGNORECASE)
            )
    assert found == prefilter.FOLD_FIXES


_literal_atom = st.sampled_from(["a", "b", "ab", "ba", "abc", "K", "i", "s", "é", "x y", "a.b", "-", "_", " "]).map(
    re.escape
)
_bounded_atom = st.sampled_from(
    ["[ab]", "[^a]", "[a-c]", "[0-9]", "[|]", r"\b", r"(?=a)", r"(?!b)", r"(?<=a)", "a?", "(?:ab)?", "b{2}", "a{0,2}",
     "(?i:k)", "(?-i:a)", r"\|", "$", "^", ".", r"\d", ".{0,3}"]
)
# Unbounded atoms only at the top level: nested under repeats they backtrack for ever in `re` itself.
_unbounded_atom = st.sampled_from([r"\d+", r"\w*", r"\S+", ".*"])


@st.composite
def _regex(draw: st.DrawFn, depth: int = 0) -> str:
    """Small random regexes: sequences of atoms, groups and alternations."""
    atoms = [_literal_atom, _bounded_atom] + ([_unbounded_atom] if depth == 0 else [])
    parts = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if depth < 2 and draw(st.booleans()):
            inner = "|".join(draw(st.lists(_regex(depth + 1), min_size=1, max_size=3)))
            name = draw(st.integers(0, 9))
            opener = draw(st.sampled_from(["(", "(?:", f"(?P<g{name}>", "(?>"]))
            parts.append(f"{opener}{inner}){draw(st.sampled_from(['', '?', '{1,2}']))}")
        else:
            parts.append(draw(st.one_of(*atoms)))
    return "".join(parts)


_haystack = st.lists(
    st.sampled_from(["a", "b", "c", "ab", "abc", "AB", "K", "k", "İ", "ı", "ſ", "S", "é", "x y", "|", "-", "_", " ",
                     "1", "42", ".", "\n"]),
    max_size=16,
).map("".join)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(branches=st.lists(_regex(), min_size=1, max_size=4), texts=st.lists(_haystack, min_size=1, max_size=6),
       flags=st.sampled_from([re.IGNORECASE, re.IGNORECASE | re.ASCII, 0, re.IGNORECASE | re.DOTALL]))
@example(branches=["K"], texts=["\u212a"], flags=re.IGNORECASE | re.ASCII)
@example(branches=["ab", "s[ab]"], texts=["ſA", "\u017fb"], flags=re.IGNORECASE)
@example(branches=["i(?:x)?"], texts=["\u0130", "\u0131x"], flags=re.IGNORECASE)
def test_any_regex_split_into_gated_alternatives_finds_what_the_whole_regex_finds(
    branches: list[str], texts: list[str], flags: int
) -> None:
    try:
        pattern = re.compile("|".join(branches), flags)
    except re.error:
        return
    index = prefilter.TextIndex(patterns=[pattern, None, pattern])
    for text in texts:
        expected = {0, 2} if pattern.search(text) else set()
        assert index.hits(text=text) == expected, (pattern.pattern, text)


def test_backreferences_and_verbose_patterns_keep_the_regex_whole() -> None:
    for source, flags in ((r"(a)|(b)(c)\2", re.IGNORECASE), (r"(?P<x>a)(?P=x)|b", re.IGNORECASE), ("a | b", re.IGNORECASE | re.VERBOSE)):
        alternatives = prefilter.alternatives_of(rule=0, pattern=re.compile(source, flags))
        assert [item.source for item in alternatives] == [source]


def test_a_pipe_inside_a_class_a_group_or_an_escape_does_not_split_the_regex() -> None:
    assert prefilter.split_alternatives(r"a\|b|[|]c|[]|]d|(e|f)g|h") == [r"a\|b", "[|]c", "[]|]d", "(e|f)g", "h"]


def test_a_literal_only_alternative_is_decided_without_running_its_regex() -> None:
    index = prefilter.TextIndex(patterns=[re.compile("Too many pods|OutOf(cpu|memory)", re.IGNORECASE)])
    assert [item.exact for item in index.alternatives] == [True, True]
    assert index.alternatives[1].needles == ("outofcpu", "outofmemory")


@pytest.mark.parametrize("text", ["", "x", "İNSUFFICIENT nvidia.com/gpu", "ſegmentation fault", "OOMKİLLED"])
def test_short_and_unicode_lines_get_the_same_verdict_from_both_paths(text: str) -> None:
    assert lines.classify_line(text) == lines.classify_line_plain(text)


def test_an_equal_tuple_of_the_same_rules_reuses_the_index_and_other_rules_get_their_own() -> None:
    fresh = tuple(rule for rule in RULES)  # an equal tuple, not the same object
    assert fresh is not RULES
    assert prefilter.for_rules(fresh) is prefilter.for_rules(RULES)
    assert prefilter.for_rules(RULES[:20]) is not prefilter.for_rules(RULES)


def test_a_partial_catalogue_gets_the_same_verdicts_from_both_paths() -> None:
    subset = tuple(rule for number, rule in enumerate(RULES) if number % 3)
    for text in _corpus_texts()[:400]:
        assert lines.classify_line(text, rules=subset) == lines.classify_line_plain(text, rules=subset)
