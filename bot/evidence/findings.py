"""Plain data that flows from collectors to the classifier to every surface; no rendering here."""

from __future__ import annotations

import dataclasses
import enum
from datetime import UTC, datetime
from typing import Any


class Layer(enum.StrEnum):
    """The seeds' layered triage model; these exact names appear in every output."""

    SCHEDULER = "scheduler"
    RUNTIME = "runtime"
    WORKFLOW = "workflow"
    FABRIC = "fabric"


class Severity(enum.StrEnum):
    """How bad one finding is; ordered from worst to mildest."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Lower is worse, for sorting."""
        return list(Severity).index(self)


class Scope(enum.StrEnum):
    """Where the failure lives (seed Track 4), when evidence shows it."""

    NODE_LOCAL = "node-local"
    PATH_LOCAL = "path-local"
    FABRIC_WIDE = "fabric-wide"
    WORKLOAD = "workload"


class CollectorOutcome(enum.StrEnum):
    """How one collector ended inside its bounds."""

    OK = "ok"
    PARTIAL = "partial"
    TIMEOUT = "timeout"
    ERROR = "error"
    FORBIDDEN = "forbidden"
    SKIPPED = "skipped"


def utcnow() -> datetime:
    """One clock for every record: timezone-aware UTC."""
    return datetime.now(UTC)


def _plain(value: Any) -> Any:
    """Turn dataclasses, enums and datetimes into JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Observation:
    """One raw fact a collector saw (an event, a pod state, a log line, an scontrol field).

    Structured `fields` come first for rules (reason, exit_code, condition...); `text` is the
    human-readable line that regex rules fall back to. `command` is what a human would run to see it.
    `current` is False when the object has since recovered (`resolved_by` says how): history is shown,
    never made a verdict. `age_seconds` is how long before the snapshot the fact was last true.
    """

    source: str
    kind: str
    subject: str
    text: str
    command: str
    observed_at: datetime
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    current: bool = True
    resolved_by: str = ""
    age_seconds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return _plain(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Evidence:
    """The seeds' evidence standard: command, output, timestamp, expected vs observed."""

    source: str
    command: str
    excerpt: str
    observed_at: datetime
    expected: str = ""
    observed: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return _plain(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabelledExample:
    """A labelled corpus line a learned finding cites as its evidence (text, its layer, its tool family)."""

    text: str
    layer: str | None
    family: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finding:
    """One diagnosis: which layer, which rule fired, what proves it, what to run next."""

    layer: Layer | None
    rule: str
    severity: Severity
    summary: str
    evidence: tuple[Evidence, ...]
    next_step: str
    scope: Scope | None = None
    subject: str = ""
    caused_by: str | None = None
    scope_nodes: tuple[str, ...] = ()
    current: bool = True
    resolved_by: str = ""
    # Set only when no rule explained the evidence and the learned model named the layer.
    learned: bool = False
    confidence: float | None = None
    nearest: tuple[LabelledExample, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; `next_step` is published as `next` in the stable schema."""
        data = _plain(self)
        data["next"] = data.pop("next_step")
        return data


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    """The one answer: the failing layer (None when evidence is insufficient) and how sure we are."""

    layer: Layer | None
    confidence: float
    summary: str
    scope: Scope | None = None
    scope_nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return _plain(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectorReport:
    """What one collector did inside its bounds, so the report can say what was not looked at."""

    name: str
    outcome: CollectorOutcome
    elapsed_ms: int
    items: int = 0
    truncated: bool = False
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return _plain(self)
