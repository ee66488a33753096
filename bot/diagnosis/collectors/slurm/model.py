"""The shape both Slurm backends (CLI text, slurmrestd JSON) normalise to, so the collector sees one."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fetched(Generic[T]):
    """One backend answer: the data, the command a human would run, and what went wrong if anything."""

    data: T
    command: str
    excerpt: str = ""
    error: str = ""
    truncated: bool = False
    timed_out: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlurmJob:
    """One job as `scontrol show job` / `GET /slurm/v0.0.38/job/{id}` describe it."""

    job_id: str
    name: str = ""
    user: str = ""
    uid: int | None = None  # from the scheduler's record: whose files the job's output may be
    state: str = ""
    reason_raw: str | None = None
    reason_code: str | None = None
    unavailable_nodes: tuple[str, ...] = ()
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    nodelist: str | None = None
    nodes: tuple[str, ...] = ()
    req_nodes: tuple[str, ...] = ()
    exc_nodes: tuple[str, ...] = ()
    dependency: str | None = None
    submit_time: datetime | None = None
    eligible_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    time_limit: str | None = None
    time_limit_minutes: int | None = None
    num_nodes: int | None = None
    num_cpus: int | None = None
    tres_req: dict[str, str] = dataclasses.field(default_factory=dict)
    tres_alloc: dict[str, str] = dataclasses.field(default_factory=dict)
    gres_req: str | None = None
    gres_alloc: tuple[str, ...] = ()
    exit_code: int | None = None
    exit_signal: int | None = None
    derived_exit_code: int | None = None
    batch_host: str | None = None
    restarts: int | None = None
    work_dir: str | None = None
    std_out: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None

    @property
    def pending(self) -> bool:
        """Still waiting to start."""
        return self.state == "PENDING"

    @property
    def finished(self) -> bool:
        """In a terminal state."""
        return self.state in TERMINAL_STATES


TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlurmNode:
    """One node's scheduler view: state flags and the reason an admin or health check left."""

    name: str
    state: str = ""
    state_flags: tuple[str, ...] = ()
    reason: str | None = None
    reason_set_by: str | None = None
    reason_time: datetime | None = None
    gres: str | None = None
    gres_used: str | None = None
    cfg_tres: dict[str, str] = dataclasses.field(default_factory=dict)
    alloc_tres: dict[str, str] = dataclasses.field(default_factory=dict)
    partitions: tuple[str, ...] = ()

    @property
    def unavailable(self) -> bool:
        """Down, drained/draining, failing or otherwise not schedulable."""
        bad = {
            "DOWN",
            "DRAIN",
            "DRAINED",
            "DRAINING",
            "FAIL",
            "FAILING",
            "NOT_RESPONDING",
            "MAINT",
            "REBOOT_REQUESTED",
            "POWERED_DOWN",
            "FUTURE",
            "INVAL",
            "UNKNOWN",
        }
        return self.state in bad or any(flag in bad for flag in self.state_flags)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlurmPartition:
    """One partition's state and the limits a job can trip on."""

    name: str
    state: str = ""
    nodes: str | None = None
    total_nodes: int | None = None
    total_cpus: int | None = None
    min_nodes: int | None = None
    max_nodes: int | None = None
    max_time: str | None = None
    max_time_minutes: int | None = None
    default_time: str | None = None
    allow_accounts: str | None = None
    allow_qos: str | None = None
    qos: str | None = None
    max_cpus_per_node: str | None = None
    max_mem_per_node: str | None = None
    tres: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlurmStep:
    """One step (batch, extern, 0, 1...) with its outcome when accounting or scontrol knows it."""

    step_id: str
    name: str = ""
    state: str = ""
    exit_code: int | None = None
    exit_signal: int | None = None
    nodelist: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    elapsed: str | None = None
    max_rss: str | None = None
    req_mem: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Accounting:
    """What sacct (or slurmdbd over REST) said, or why it could not say anything."""

    enabled: bool
    steps: tuple[SlurmStep, ...] = ()
    message: str = ""


class SlurmBackend(Protocol):
    """One interface over `scontrol`/`sacct` and slurmrestd."""

    name: str

    def version(self) -> Fetched[str | None]:
        """The Slurm release, for placement."""
        ...

    def job(self, *, job_id: str) -> Fetched[SlurmJob | None]:
        """One job, or None when the controller does not know it (never submitted, or purged)."""
        ...

    def partition(self, *, name: str) -> Fetched[SlurmPartition | None]:
        """One partition by name."""
        ...

    def nodes(self, *, names: list[str]) -> Fetched[list[SlurmNode]]:
        """The named nodes (the caller bounds the count)."""
        ...

    def steps(self, *, job_id: str) -> Fetched[list[SlurmStep]]:
        """Live steps of a running job."""
        ...

    def accounting(self, *, job_id: str) -> Fetched[Accounting]:
        """The job's steps from accounting, or `enabled=False` with the reason."""
        ...

    def partition_node_states(self, *, name: str) -> Fetched[dict[str, int]]:
        """How many of the partition's nodes are in each state (idle, mixed, allocated, drained, down...)."""
        ...


def minutes_from_slurm_duration(raw: Any) -> int | None:
    """`1-02:03:04`, `02:03:04`, `10:00` (min:sec), `UNLIMITED` -> whole minutes (None when unlimited)."""
    if raw is None:
        return None
    if isinstance(raw, int):
        return raw
    text = str(raw).strip()
    if not text or text.upper() in {"UNLIMITED", "INFINITE", "NONE", "N/A", "PARTITION_LIMIT"}:
        return None
    if text.isdigit():
        return int(text)
    days = 0
    if "-" in text:
        day_text, _, text = text.partition("-")
        days = int(day_text)
    parts = [int(part) for part in text.split(":")]
    if days and len(parts) == 1:  # `days-hours`
        parts = [parts[0], 0, 0]
    if len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, minutes, seconds = 0, parts[0], parts[1]
    else:
        hours, minutes, seconds = 0, parts[0], 0
    return days * 1440 + hours * 60 + minutes + (1 if seconds else 0)
