"""Parse Slurm's text forms (`scontrol -o` key=value lines, hostlists, TRES strings, sacct -P)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

# A key starts after whitespace: letters/digits plus the punctuation scontrol uses in keys
# (`AllocNode:Sid`, `CPUs/Task`, `ReqB:S:C:T`, `JOB_GRES`).
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/.]*)=")
# Keys whose value runs to the end of the line: free text that may hold spaces and '='.
_TRAILING_FREE_TEXT = ("Reason",)
_NULLS = {"(null)", "N/A", "None", "Unknown", "", "n/a", "(NULL)"}


def parse_scontrol_record(line: str) -> dict[str, str]:
    """One `scontrol -o show ...` line into an ordered key -> value mapping (first key wins)."""
    text = line.strip()
    record: dict[str, str] = {}
    for name in _TRAILING_FREE_TEXT:
        marker = f" {name}="
        at = text.find(marker)
        # Node records end with Reason=...; job records carry Reason= mid-line without spaces.
        if at >= 0 and not _KEY.search(text[at + len(marker) :]):
            record_tail = text[at + len(marker) :]
            text = text[:at]
            record.update(_split_keys(text))
            record.setdefault(name, record_tail.strip())
            return record
    return _split_keys(text)


def _split_keys(text: str) -> dict[str, str]:
    matches = list(_KEY.finditer(text))
    record: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        record.setdefault(match.group(1), text[match.end() : end].strip())
    return record


def parse_scontrol_records(text: str) -> list[dict[str, str]]:
    """Many `-o` lines, one record each; blank lines skipped."""
    return [parse_scontrol_record(line) for line in text.splitlines() if "=" in line]


def value(record: dict[str, str], key: str) -> str | None:
    """A field with Slurm's null spellings mapped to None."""
    raw = record.get(key)
    if raw is None or raw.strip() in _NULLS:
        return None
    return raw.strip()


def parse_exit_code(raw: str | None) -> tuple[int | None, int | None]:
    """`ExitCode=3:0` -> (exit status 3, signal 0)."""
    if not raw or ":" not in raw:
        return None, None
    status, _, signal = raw.partition(":")
    try:
        return int(status), int(signal)
    except ValueError:
        return None, None


def parse_time(raw: str | None) -> datetime | None:
    """`2026-11-29T22:07:53` (controller local time, taken as UTC) or a Unix epoch number."""
    if raw is None or raw.strip() in _NULLS or raw.strip() in {"0", "None"}:
        return None
    text = raw.strip()
    if text.isdigit():
        return datetime.fromtimestamp(int(text), UTC)
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    except ValueError:
        return None


def parse_tres(raw: str | None) -> dict[str, str]:
    """`cpu=1,mem=4000M,node=1,gres/gpu=2` -> {'cpu': '1', 'mem': '4000M', ...}."""
    if not raw or raw in _NULLS:
        return {}
    result: dict[str, str] = {}
    for part in raw.split(","):
        key, sep, item = part.partition("=")
        if sep:
            result[key.strip()] = item.strip()
    return result


def parse_reason(raw: str | None) -> tuple[str | None, list[str]]:
    """`ReqNodeNotAvail,_UnavailableNodes:gpu-absent-1` -> ('ReqNodeNotAvail', ['gpu-absent-1'])."""
    if raw is None or raw.strip() in {"", "None", "(null)"}:
        return None, []
    text = raw.replace("_", " ").strip()
    code, _, rest = text.partition(",")
    nodes: list[str] = []
    match = re.search(r"UnavailableNodes:(\S*)", rest.replace(" ", "") if rest else "")
    if match and match.group(1):
        nodes = expand_hostlist(match.group(1))
    return code.strip(), nodes


def parse_dependency(raw: str | None) -> list[dict[str, str]]:
    """`afterok:11(unfulfilled),afterany:9(failed)` -> [{'type','job_id','state'}]."""
    if raw is None or raw in _NULLS:
        return []
    result = []
    for part in re.split(r"[,?&]", raw):
        match = re.fullmatch(r"\s*([a-z_]+):([0-9_+*]+)(?:\(([^)]*)\))?\s*", part)
        if match:
            result.append({"type": match.group(1), "job_id": match.group(2), "state": match.group(3) or ""})
        elif part.strip():
            result.append({"type": part.strip(), "job_id": "", "state": ""})
    return result


_BRACKET = re.compile(r"^(.*?)\[([^\]]+)\](.*)$")


def expand_hostlist(expression: str, *, limit: int = 10_000) -> list[str]:
    """Expand `node[01-03,07],gpu-a` into names, stopping at `limit` (a hostlist may be huge)."""
    names: list[str] = []
    for part in _split_top_level(expression):
        for name in _expand_one(part):
            names.append(name)
            if len(names) >= limit:
                return names
    return names


def _split_top_level(expression: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in expression:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _expand_one(part: str) -> list[str]:
    match = _BRACKET.match(part)
    if not match:
        return [part]
    prefix, ranges, suffix = match.groups()
    expanded: list[str] = []
    for item in ranges.split(","):
        low, sep, high = item.partition("-")
        if sep and low.isdigit() and high.isdigit():
            width = len(low)
            for number in range(int(low), int(high) + 1):
                expanded.extend(f"{prefix}{number:0{width}d}{tail}" for tail in _expand_one(suffix) or [""])
        else:
            expanded.extend(f"{prefix}{item}{tail}" for tail in _expand_one(suffix) or [""])
    return expanded


def parse_sacct_parsable(text: str, *, columns: list[str]) -> list[dict[str, str]]:
    """`sacct -P -n --format=a,b,c` output (pipe-separated, no header) into dicts."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        rows.append(
            {column: (cells[index] if index < len(cells) else "") for index, column in enumerate(columns)}
        )
    return rows
