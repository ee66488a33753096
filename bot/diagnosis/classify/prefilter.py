"""Literal prefilter for the rule regexes: a line pays for a few substring checks, not for every rule's regex.

Each rule regex is split at its top-level `|` into alternatives. Every alternative gets the literals one of
which any text it matches must contain (read from the regex parser's tree), folded the way IGNORECASE compares
ASCII letters. A line is folded once and read once by an Aho-Corasick automaton of every literal, and only
the alternatives whose literals are present run their own (small) regex; an alternative that is nothing but
its literals needs no regex at all. A regex that cannot be split safely (backreferences, verbose mode) is kept
whole, gated by its own literals, and one with no literal at all runs on every line.
`tests/bot/diagnosis/classify/test_prefilter.py` checks every verdict against the plain full scan.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable, Sequence
from re import _parser  # type: ignore[attr-defined]  # the stdlib regex parser; Python >= 3.11
from typing import Generic, TypeVar

import ahocorasick

from bot.diagnosis.classify import catalogue

# The only non-ASCII characters that IGNORECASE matches against ASCII letters (İ ı -> i, ſ -> s, K -> k);
# `test_prefilter` re-derives this from every code point, so a new Python cannot silently add one.
FOLD_FIXES = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
T = TypeVar("T")
_TEXT = object()  # a pseudo-op: a run of folded ASCII literals merged by `_literal_runs`
_REPEATS = (_parser.MAX_REPEAT, _parser.MIN_REPEAT, getattr(_parser, "POSSESSIVE_REPEAT", _parser.MAX_REPEAT))


def fold(text: str) -> str:
    """Lower-case so that a literal IGNORECASE matches is always a plain substring of the folded line."""
    if text.isascii():
        return text.lower()
    return text.translate(FOLD_FIXES).lower()


MAX_STRINGS = 32
_CLASS_RANGE = 10


def _score(needles: tuple[str, ...]) -> tuple[int, int]:
    """Longer shortest literal first (fewer lines contain it), then fewer alternatives."""
    return min(len(needle) for needle in needles), -len(needles)


def _best(left: tuple[str, ...] | None, right: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if not left:
        return right or None
    if not right:
        return left
    return right if _score(right) > _score(left) else left


def minimal(strings: set[str] | frozenset[str]) -> tuple[str, ...]:
    """Drop every string that contains another: finding the shorter one is implied by finding the longer."""
    ordered = sorted(strings, key=lambda item: (len(item), item))
    kept: list[str] = []
    for item in ordered:
        if not any(other in item for other in kept):
            kept.append(item)
    return tuple(sorted(kept))


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Language:
    """The folded strings a parsed piece can consume (None: too many or unbounded) and whether that is all
    there is to it (no anchors, lookarounds, atomic groups or flag changes)."""

    strings: frozenset[str] | None
    exact: bool


_ZERO_WIDTH = _Language(strings=frozenset({""}), exact=False)
_UNBOUNDED = _Language(strings=None, exact=False)


def _product(left: frozenset[str] | None, right: frozenset[str] | None) -> frozenset[str] | None:
    if left is None or right is None or len(left) * len(right) > MAX_STRINGS:
        return None
    return frozenset(head + tail for head in left for tail in right)


def _class(items: Sequence[tuple[object, object]]) -> frozenset[str] | None:
    """A character class of a few ASCII characters or a short ASCII range, folded; None otherwise."""
    chars: set[str] = set()
    for op, arg in items:
        if op is _parser.LITERAL and isinstance(arg, int) and arg < 128:
            chars.add(chr(arg).lower())
        elif op is _parser.RANGE and arg[1] < 128 and arg[1] - arg[0] < _CLASS_RANGE:  # type: ignore[index]
            chars.update(chr(code).lower() for code in range(arg[0], arg[1] + 1))  # type: ignore[index]
        else:
            return None
    return frozenset(chars) if len(chars) <= MAX_STRINGS else None


def _item(op: object, arg: object) -> _Language:
    """The language of one parsed item."""
    if op is _TEXT:
        return _Language(strings=frozenset({str(arg)}), exact=True)
    if op is _parser.LITERAL:
        if isinstance(arg, int) and arg < 128:
            return _Language(strings=frozenset({chr(arg).lower()}), exact=True)
        return _UNBOUNDED
    if op is _parser.IN:
        chars = _class(arg)  # type: ignore[arg-type]
        return _UNBOUNDED if chars is None else _Language(strings=chars, exact=True)
    if op in (_parser.AT, _parser.ASSERT, _parser.ASSERT_NOT):
        return _ZERO_WIDTH
    if op is _parser.SUBPATTERN:
        inner = _sequence(arg[-1])  # type: ignore[index]
        flags_changed = bool(arg[1] or arg[2])  # type: ignore[index]
        return _Language(strings=inner.strings, exact=inner.exact and not flags_changed)
    if op is _parser.BRANCH:
        branches = [_sequence(branch) for branch in arg[1]]  # type: ignore[index]
        if any(branch.strings is None for branch in branches):
            return _UNBOUNDED
        union = frozenset(item for branch in branches for item in branch.strings or ())
        if len(union) > MAX_STRINGS:
            return _UNBOUNDED
        return _Language(strings=union, exact=all(branch.exact for branch in branches))
    if op in _REPEATS:
        low, high, body = arg  # type: ignore[misc]
        inner = _sequence(body)
        if inner.strings is None or high > 2:
            return _UNBOUNDED
        strings: frozenset[str] | None = frozenset({""}) if low == 0 else None
        power: frozenset[str] | None = frozenset({""})
        for count in range(1, high + 1):
            power = _product(power, inner.strings)
            if count >= low:
                strings = power if strings is None else (
                    None if power is None else frozenset(strings | power)
                )
        exact = inner.exact and op is not getattr(_parser, "POSSESSIVE_REPEAT", None)
        return _Language(strings=strings, exact=exact) if strings is not None else _UNBOUNDED
    return _UNBOUNDED


def _literal_runs(items: Sequence[tuple[object, object]]) -> list[tuple[object, object]]:
    """Merge consecutive ASCII literals into one pseudo-item holding their folded text (one product, not many)."""
    merged: list[tuple[object, object]] = []
    for op, arg in items:
        if op is _parser.LITERAL and isinstance(arg, int) and arg < 128:
            char = chr(arg).lower()
            if merged and merged[-1][0] is _TEXT:
                merged[-1] = (_TEXT, f"{merged[-1][1]}{char}")
            else:
                merged.append((_TEXT, char))
        else:
            merged.append((op, arg))
    return merged


def _sequence(items: Sequence[tuple[object, object]]) -> _Language:
    """The language of a parsed sequence: the product of its items' languages."""
    strings: frozenset[str] | None = frozenset({""})
    exact = True
    for op, arg in _literal_runs(items):
        item = _item(op, arg)
        strings = _product(strings, item.strings)
        exact = exact and item.exact
        if strings is None:
            return _UNBOUNDED
    return _Language(strings=strings, exact=exact)


def requirements_of(items: Sequence[tuple[object, object]]) -> list[tuple[str, ...]]:
    """Sets of folded literals such that every match of this parsed sequence contains one of each set.

    Consecutive items with a small finite language (literals, short alternations, optional groups, anchors)
    form one run whose strings are one set; an unbounded item ends the run and offers its own. The most
    selective set comes first (it gates the alternative); the others are checked before its regex runs."""
    found: list[tuple[str, ...]] = []
    run: frozenset[str] | None = frozenset({""})
    for op, arg in _literal_runs(items):
        language = _item(op, arg)
        joined = _product(run, language.strings)
        if joined is not None:
            run = joined
            continue
        if run and "" not in run:
            found.append(minimal(run))
        if language.strings is not None:
            run = language.strings
            continue
        run = frozenset({""})
        candidate: tuple[str, ...] | None = None
        if op is _parser.SUBPATTERN:
            candidate = needles_of(arg[-1])  # type: ignore[index]
        elif op is getattr(_parser, "ATOMIC_GROUP", None):
            candidate = needles_of(arg)  # type: ignore[arg-type]
        elif op in _REPEATS and arg[0] >= 1:  # type: ignore[index, operator]
            candidate = needles_of(arg[2])  # type: ignore[index]
        elif op is _parser.BRANCH:
            alternatives = [needles_of(branch) for branch in arg[1]]  # type: ignore[index]
            if all(alternatives):
                candidate = minimal({needle for found in alternatives for needle in found or ()})
        if candidate:
            found.append(candidate)
    if run and "" not in run:
        found.append(minimal(run))
    return sorted((item for item in found if item and all(item)), key=_score, reverse=True)


def needles_of(items: Sequence[tuple[object, object]]) -> tuple[str, ...] | None:
    """The most selective requirement of a parsed sequence; None when nothing literal is required."""
    found = requirements_of(items)
    return found[0] if found else None


def split_alternatives(pattern: str) -> list[str] | None:
    """The pattern's top-level `|` alternatives; None when splitting could change what it matches."""
    if "(?#" in pattern or "(?(" in pattern:
        return None
    pieces: list[str] = []
    depth, start, index, in_class = 0, 0, 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            index += 1
            if pattern[index : index + 1] == "^":
                index += 1
            if pattern[index : index + 1] == "]":
                index += 1
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            pieces.append(pattern[start:index])
            start = index + 1
        index += 1
    if depth != 0 or in_class:
        return None
    pieces.append(pattern[start:])
    return pieces


@dataclasses.dataclass(frozen=True, kw_only=True)
class Alternative:
    """One top-level alternative of one rule's regex and the literals that gate it."""

    rule: int
    source: str
    flags: int
    needles: tuple[str, ...]
    exact: bool
    also: tuple[tuple[str, ...], ...] = ()
    whole: str = ""


def _whole(*, rule: int, pattern: re.Pattern[str]) -> list[Alternative]:
    """The regex kept whole, gated by its own literals when it has any."""
    try:
        required = requirements_of(_parser.parse(pattern.pattern, pattern.flags))
    except (re.error, TypeError, IndexError):
        required = []
    return [
        Alternative(
            rule=rule,
            source=pattern.pattern,
            flags=pattern.flags,
            needles=required[0] if required else (),
            exact=False,
            also=tuple(required[1:]),
        )
    ]


def _folds_exactly(flags: int) -> bool:
    """Case-insensitive with Unicode folding: then `fold` + `in` is exactly what the regex engine compares."""
    return bool(flags & re.IGNORECASE) and not flags & re.ASCII


_METACHARS = re.compile(r"[\\^$.|?*+()\[\]{}]")  # none of these: the piece is its own literal text
# Backreferences and conditionals name groups by number or name: split apart, the numbers would shift.
_REFERS_TO_GROUPS = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")


def alternatives_of(*, rule: int, pattern: re.Pattern[str]) -> list[Alternative]:
    """Split one rule regex into gated alternatives (whole when the split is not provably equivalent)."""
    pieces = split_alternatives(pattern.pattern)
    if pieces is None or pattern.flags & re.VERBOSE or _REFERS_TO_GROUPS.search(pattern.pattern):
        return _whole(rule=rule, pattern=pattern)
    alternatives = []
    for piece in pieces:
        if piece and piece.isascii() and _folds_exactly(pattern.flags) and not _METACHARS.search(piece):
            alternatives.append(
                Alternative(
                    rule=rule, source=piece, flags=pattern.flags, needles=(piece.lower(),), exact=True,
                    whole=pattern.pattern,
                )
            )
            continue
        try:
            parsed = _parser.parse(piece, pattern.flags)
        except re.error:
            return _whole(rule=rule, pattern=pattern)
        if parsed.state.flags != pattern.flags or not piece:
            return _whole(rule=rule, pattern=pattern)
        language = _sequence(parsed)
        strings = language.strings
        if _folds_exactly(pattern.flags) and language.exact and strings and "" not in strings:
            required, exact = [minimal(strings)], True
        else:
            required, exact = requirements_of(parsed), False
        alternatives.append(
            Alternative(
                rule=rule,
                source=piece,
                flags=pattern.flags,
                needles=required[0] if required else (),
                exact=exact,
                also=tuple(required[1:]),
                whole=pattern.pattern,
            )
        )
    return alternatives


class TextIndex:
    """Which rules' text regexes match a line, found through their literals (same answer as a full scan).

    Every literal goes into one Aho-Corasick automaton (pyahocorasick), so a line is read once, in C, for all
    of them, whatever their number or length.
    """

    def __init__(self, *, patterns: Sequence[re.Pattern[str] | None],
                 vetoes: Sequence[re.Pattern[str] | None] = (),
                 decided: Sequence[tuple[re.Pattern[str], frozenset[int]]] = ()) -> None:
        self._vetoes = {rule: veto for rule, veto in enumerate(vetoes) if veto is not None}
        # Decided phrases are indexed like rules, after them: a phrase found vetoes the rules it names.
        self._rules = len(patterns)
        self._decided = tuple(vetoed for _, vetoed in decided)
        self.alternatives: list[Alternative] = [
            alternative
            for rule, pattern in enumerate([*patterns, *(phrase for phrase, _ in decided)])
            if pattern is not None
            for alternative in alternatives_of(rule=rule, pattern=pattern)
        ]
        self._compiled: list[re.Pattern[str] | None] = [None] * len(self.alternatives)
        gates: dict[str, list[tuple[int, bool, int]]] = {}
        self._always: list[tuple[int, int]] = []
        for number, alternative in enumerate(self.alternatives):
            if not alternative.needles:
                self._always.append((alternative.rule, number))
            for needle in alternative.needles:
                gates.setdefault(needle, []).append((alternative.rule, alternative.exact, number))
        self._gates = {needle: tuple(entries) for needle, entries in gates.items()}
        self._automaton = ahocorasick.Automaton()
        for needle in sorted(gates):
            self._automaton.add_word(needle, needle)
        if gates:
            self._automaton.make_automaton()

    def needles_in(self, *, folded: str) -> set[str]:
        """The indexed literals present in a folded line: one pass of the automaton over it."""
        if not self._gates:
            return set()
        return {needle for _, needle in self._automaton.iter(folded)}

    def _search(self, *, number: int, text: str) -> bool:
        """Run one alternative's regex, compiling it the first time a line needs it."""
        compiled = self._compiled[number]
        if compiled is None:
            alternative = self.alternatives[number]
            try:
                compiled = re.compile(alternative.source, alternative.flags)
            except re.error:  # not seen: every piece of a regex that compiles compiles; the whole is as good
                compiled = re.compile(alternative.whole or alternative.source, alternative.flags)
            self._compiled[number] = compiled
        return compiled.search(text) is not None

    def _verify(self, *, number: int, text: str, folded: str) -> bool:
        """The alternative's other required literals are all present, then its regex matches."""
        for required in self.alternatives[number].also:
            if not any(needle in folded for needle in required):
                return False
        return self._search(number=number, text=text)

    def hits(self, *, text: str) -> set[int]:
        """Indices of the rules whose text regex finds a match in `text` (and whose `unless` finds none)."""
        found: set[int] = set()
        gates = self._gates
        folded = fold(text)
        for needle in self.needles_in(folded=folded):
            for rule, exact, number in gates[needle]:
                if rule not in found and (exact or self._verify(number=number, text=text, folded=folded)):
                    found.add(rule)
        for rule, number in self._always:
            if rule not in found and self._search(number=number, text=text):
                found.add(rule)
        if self._decided and found and max(found) >= self._rules:
            vetoed: set[int] = set()
            for number in found:
                if number >= self._rules:
                    vetoed |= self._decided[number - self._rules]
            found = {rule for rule in found if rule < self._rules and rule not in vetoed}
        if self._vetoes:
            found = {rule for rule in found if rule not in self._vetoes or not self._vetoes[rule].search(text)}
        return found


@dataclasses.dataclass(frozen=True, kw_only=True)
class RuleIndex:
    """Per catalogue: the text index, and which rules' structured alternatives can apply to each kind."""

    text: TextIndex
    by_kind: dict[str, tuple[int, ...]]
    any_kind: tuple[int, ...]
    order: tuple[tuple[int, bool, str, int], ...]

    def structured_candidates(self, *, kind: str) -> tuple[int, ...]:
        """Rules with a structured alternative for this observation kind (or for every kind)."""
        return self.by_kind.get(kind, self.any_kind)


def _build(rules: tuple[catalogue.Rule, ...]) -> RuleIndex:
    any_kind = tuple(
        number for number, rule in enumerate(rules) if any(not item.kinds for item in rule.structured)
    )
    kinds = {kind for rule in rules for item in rule.structured for kind in item.kinds}
    by_kind = {
        kind: tuple(
            number
            for number, rule in enumerate(rules)
            if any(not item.kinds or kind in item.kinds for item in rule.structured)
        )
        for kind in kinds
    }
    return RuleIndex(
        text=TextIndex(
            patterns=[rule.text for rule in rules],
            vetoes=[rule.unless for rule in rules],
            decided=[
                (phrase, frozenset(number for number, rule in enumerate(rules) if phrase in rule.decided))
                for phrase in sorted({phrase for rule in rules for phrase in rule.decided}, key=lambda item: item.pattern)
            ],
        ),
        by_kind=by_kind,
        any_kind=any_kind,
        order=tuple((-rule.priority, rule.is_symptom, rule.id, number) for number, rule in enumerate(rules)),
    )


class PerCatalogue(Generic[T]):
    """Something built once per rules tuple: found by the tuple's identity (hashing 68 rules per line is slow),
    else by its rules' identities (an equal tuple made afresh), rebuilt only for different rules."""

    def __init__(self, *, build: Callable[[tuple[catalogue.Rule, ...]], T], keep: int = 32) -> None:
        self._build = build
        self._keep = keep
        self._by_tuple: dict[int, tuple[tuple[catalogue.Rule, ...], T]] = {}
        self._by_rules: dict[tuple[int, ...], tuple[tuple[catalogue.Rule, ...], T]] = {}

    def get(self, rules: tuple[catalogue.Rule, ...]) -> T:
        """The built value for these rules."""
        entry = self._by_tuple.get(id(rules))
        if entry is not None and entry[0] is rules:
            return entry[1]
        key = tuple(map(id, rules))
        entry = self._by_rules.get(key)
        if entry is None or len(entry[0]) != len(rules) or not all(map(operator.is_, entry[0], rules)):
            entry = (rules, self._build(rules))
            if len(self._by_rules) >= self._keep:
                self._by_rules.clear()
            self._by_rules[key] = entry
        if len(self._by_tuple) >= self._keep:
            self._by_tuple.clear()
        self._by_tuple[id(rules)] = (rules, entry[1])
        return entry[1]


_INDEXES = PerCatalogue(build=_build)


def for_rules(rules: tuple[catalogue.Rule, ...]) -> RuleIndex:
    """The index of one rules tuple, built once."""
    return _INDEXES.get(rules)
