"""SECURITY.md names the test that proves each promise: every test file it names exists."""

import re

from tests.support.paths import ROOT


def test_every_test_named_in_security_md_exists() -> None:
    named = set(re.findall(r"`(tests/[\w/.-]+\.py)`", (ROOT / "SECURITY.md").read_text(encoding="utf-8")))
    assert len(named) >= 15
    assert sorted(path for path in named if not (ROOT / path).is_file()) == []
