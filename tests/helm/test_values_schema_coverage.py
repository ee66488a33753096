"""values.schema.json describes every key values.yaml has, so no value escapes validation."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from tests.helm.chart import CHART_DIR


def _paths(values: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in values.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _paths(value, (*prefix, key))


def _schema_for(
    schema: Mapping[str, Any], path: tuple[str, ...], root: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    node: Mapping[str, Any] = schema
    for key in path:
        if "$ref" in node:
            node = root["definitions"][node["$ref"].rsplit("/", 1)[-1]]
        properties = node.get("properties", {})
        if key in properties:
            node = properties[key]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node


def test_every_key_in_values_yaml_has_a_schema() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert [".".join(p) for p in _paths(values) if _schema_for(schema, p, schema) is None] == []


def test_every_top_level_schema_property_exists_in_values_yaml() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert sorted(set(schema["properties"]) - set(values)) == []
