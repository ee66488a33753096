"""`dcgmi diag` output, as the table text or `-j` JSON (DCGM 3.x test_categories and 4.x tests)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from bot.diagnosis.collectors.gpu.errors import GpuParseError


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiagResult:
    """One `dcgmi diag` test outcome (per GPU group or per GPU)."""

    category: str
    test: str
    result: str  # Pass | Fail | Warn | Skip | other text as printed
    gpu_ids: str = ""
    details: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiagReport:
    """All results plus the metadata rows (DCGM version, driver, device ids)."""

    results: tuple[DiagResult, ...]
    metadata: dict[str, str]

    @property
    def failed(self) -> list[DiagResult]:
        """Tests that failed."""
        return [item for item in self.results if item.result.lower().startswith("fail")]


def _status(raw: Any) -> str:
    text = str(raw or "").strip()
    return {"PASS": "Pass", "FAIL": "Fail", "WARN": "Warn", "SKIP": "Skip", "SKIPPED": "Skip"}.get(
        text.upper(), text
    )


def parse_dcgmi_diag(text: str) -> DiagReport:
    """`dcgmi diag` table text, or its `-j` JSON (3.x `test_categories` and 4.x top-level `tests`)."""
    stripped = text.strip()
    brace = stripped.find("{")
    if brace >= 0 and ("test_categories" in stripped or '"tests"' in stripped):
        try:
            return _diag_json(json.loads(stripped[brace:]))
        except ValueError as error:
            raise GpuParseError(f"dcgmi JSON does not parse: {error}") from None
    return _diag_table(stripped)


def _diag_json(data: Any) -> DiagReport:
    root = data
    if isinstance(data, dict):
        for key in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
            if isinstance(data.get(key), dict):
                root = data[key]
    if not isinstance(root, dict):
        raise GpuParseError("dcgmi JSON has no diagnostic object")
    groups: list[tuple[str, list[Any]]] = [
        (str(category.get("category", "")), category.get("tests") or [])
        for category in root.get("test_categories") or []
        if isinstance(category, dict)
    ]
    if isinstance(root.get("tests"), list):
        groups.append(("", root["tests"]))
    results = []
    for category, tests in groups:
        for test in tests:
            if not isinstance(test, dict):
                continue  # DCGM 3.x writes `null` between tests
            for result in test.get("results") or []:
                if not isinstance(result, dict):
                    continue
                details = [
                    str(item.get("warning", item)) if isinstance(item, dict) else str(item)
                    for key in ("warnings", "info", "errors")
                    for item in (result.get(key) or [])
                ]
                gpu = result.get("gpu_ids", result.get("entity_id", ""))
                results.append(
                    DiagResult(
                        category=category or str(test.get("category", "")),
                        test=str(test.get("name", "")),
                        result=_status(result.get("status")),
                        gpu_ids=str(gpu),
                        details=tuple(details),
                    )
                )
    metadata = {key: str(root[key]) for key in ("version", "driver_version") if key in root}
    return DiagReport(results=tuple(results), metadata=metadata)


def _diag_table(text: str) -> DiagReport:
    if "| Diagnostic" not in text and "Diagnostic" not in text:
        raise GpuParseError("not `dcgmi diag` output: no Diagnostic table")
    category = ""
    results: list[DiagResult] = []
    metadata: dict[str, str] = {}
    for line in text.splitlines():
        heading = re.match(r"^[|+]-+\s+(\w[\w ]*?)\s+-+\+", line)
        if heading:
            category = heading.group(1).strip()
            continue
        cells = re.match(r"^\|\s?(.*?)\s*\|\s?(.*?)\s*\|\s*$", line)
        if not cells or set(line) <= {"+", "-", "=", "|", " "}:
            continue
        name, value = cells.group(1).strip(), cells.group(2).strip()
        if name == "Diagnostic":
            continue
        if category == "Metadata":
            metadata[name] = value
        elif not name and results:  # wrapped continuation of the row above
            last = results[-1]
            details = list(last.details)
            if details:
                details[-1] = details[-1] + value
            results[-1] = dataclasses.replace(last, details=tuple(details))
        elif name in {"Info", "Warning", "Error"} and results:
            last = results[-1]
            results[-1] = dataclasses.replace(last, details=(*last.details, f"{name}: {value}"))
        elif name:
            results.append(DiagResult(category=category, test=name, result=_status(value)))
    return DiagReport(results=tuple(results), metadata=metadata)
