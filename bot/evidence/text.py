"""Text a person typed or a workload wrote, made safe to store and to print on a terminal or in a file."""

from __future__ import annotations

import re

# C0/C1 controls (ESC starts terminal escape sequences, BEL rings, a bare CR overwrites a line), bidi
# overrides and isolates (U+202E shows text reversed), zero-width and line/paragraph separators. Tab and
# newline stay.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def printable(text: str) -> str:
    """`text` with every control, bidi or invisible character shown as `?` (CRLF becomes a newline)."""
    return _UNPRINTABLE.sub("?", text.replace("\r\n", "\n"))
