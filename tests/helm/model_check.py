"""Check a manifest's shape against the Kubernetes API models the official Python client is generated from.

Deserialising into the typed model enforces required fields; serialising back and diffing finds every field
the API does not know (a typo such as `readinessprobe` would otherwise be silently dropped by the server).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client


class _Response:
    """The minimal response object ApiClient.deserialize reads (client releases before 35)."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.data = json.dumps(body)


def _deserialize(*, api: client.ApiClient, body: Mapping[str, Any], name: str) -> Any:
    """Newer clients take (text, type, content_type); older ones a response object and the type."""
    if "content_type" in inspect.signature(api.deserialize).parameters:
        return api.deserialize(json.dumps(body), name, "application/json")
    return api.deserialize(_Response(body), name)


def model_name(*, api_version: str, kind: str) -> str:
    """apps/v1 Deployment -> V1Deployment (the client's naming for every built-in kind)."""
    version = api_version.rsplit("/", 1)[-1]
    return f"{version[0].upper()}{version[1:]}{kind}"


def _unknown(original: Any, round_tripped: Any, path: str) -> list[str]:
    if isinstance(original, Mapping):
        found: list[str] = []
        back = round_tripped if isinstance(round_tripped, Mapping) else {}
        for key, value in original.items():
            if key not in back:
                found.append(f"{path}.{key}")
            else:
                found += _unknown(value, back[key], f"{path}.{key}")
        return found
    if isinstance(original, list) and isinstance(round_tripped, list):
        return [
            item
            for index, (a, b) in enumerate(zip(original, round_tripped))
            for item in _unknown(a, b, f"{path}[{index}]")
        ]
    return []


def shape_problems(*, manifest: Mapping[str, Any]) -> list[str]:
    """Unknown fields and missing required fields of one manifest; empty when it fits the API."""
    api = client.ApiClient()
    name = model_name(api_version=manifest["apiVersion"], kind=manifest["kind"])
    if not hasattr(client, name):
        return [f"no API model {name} for {manifest['apiVersion']} {manifest['kind']}"]
    try:
        model = _deserialize(api=api, body=manifest, name=name)
    except (ValueError, TypeError) as error:
        return [f"{name}: {error}"]
    return _unknown(manifest, api.sanitize_for_serialization(model), name)
