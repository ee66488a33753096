"""The chart README's values table lists every key of values.yaml with its real default, and nothing else."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from tests.helm.chart import CHART_DIR

_ROW = re.compile(
    r"^\|\s*`(?P<key>[A-Za-z0-9_.]+)`\s*\|\s*`(?P<default>[^`]*)`\s*\|(?P<description>[^|]+)\|\s*$"
)


def _leaves(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _table() -> dict[str, tuple[Any, str]]:
    text = (CHART_DIR / "README.md").read_text(encoding="utf-8")
    section = text.split("## Values", 1)[1]
    rows: dict[str, tuple[Any, str]] = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match:
            assert match["key"] not in rows, f"{match['key']} documented twice"
            rows[match["key"]] = (yaml.safe_load(match["default"]), match["description"].strip())
    return rows


def test_every_value_is_documented_in_the_readme_table_and_nothing_stale_is() -> None:
    values = dict(_leaves(yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))))
    table = _table()
    assert sorted(set(values) - set(table)) == [], "undocumented values"
    assert sorted(set(table) - set(values)) == [], "documented keys that values.yaml does not have"


def test_the_readme_defaults_match_values_yaml() -> None:
    values = dict(_leaves(yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))))
    mismatched = {
        key: (default, values[key])
        for key, (default, _) in _table().items()
        if key in values and default != values[key]
    }
    assert mismatched == {}


def test_every_documented_value_has_a_description() -> None:
    assert [key for key, (_, description) in _table().items() if len(description) < 5] == []
