"""Slurm CLI backend: `scontrol -o` text (one job, never the whole queue), `sacct -P`, argv lists only.

Slurm 22.05's `squeue --json` ignores `-j` and would list the whole queue into memory, and it has no
`scontrol show job --json`; so one job is read with `scontrol -d -o show job <id>` and parsed.
"""

from __future__ import annotations

import re

from bot.diagnosis.collectors.bounded_run import RunResult, run_bounded
from bot.diagnosis.collectors.slurm import parse
from bot.diagnosis.collectors.slurm.model import (
    Accounting,
    Fetched,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmStep,
    minutes_from_slurm_duration,
)

_NOT_FOUND = ("Invalid job id specified", "Invalid partition name specified", "Invalid node name specified")
_ACCOUNTING_OFF = ("accounting storage is disabled", "slurmdbd", "Connection refused")
SACCT_COLUMNS = [
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "NodeList",
    "Start",
    "End",
    "Elapsed",
    "MaxRSS",
    "ReqMem",
]


class CliBackend:
    """Reads Slurm through its own tools on a login or controller host."""

    name = "cli"

    def __init__(self, *, timeout_seconds: float, max_bytes: int, cluster: str | None = None) -> None:
        self._timeout = timeout_seconds
        self._max_bytes = max_bytes
        self._cluster = cluster  # `-M <cluster>`: another cluster of this Slurm database

    def _shown(self, command: str) -> str:
        """The command as a responder would retype it (with `-M <cluster>` when the backend uses one)."""
        if not self._cluster:
            return command
        tool, _, rest = command.partition(" ")
        return f"{tool} -M {self._cluster} {rest}".rstrip()

    def _run(self, argv: list[str]) -> RunResult:
        if self._cluster and argv[1:] != ["--version"]:
            argv = [argv[0], "-M", self._cluster, *argv[1:]]
        return run_bounded(
            argv=argv,
            timeout_seconds=self._timeout,
            max_bytes=self._max_bytes,
            env={"SLURM_TIME_FORMAT": "standard"},
        )

    def version(self) -> Fetched[str | None]:
        """`scontrol --version` -> `22.05.8`."""
        result = self._run(["scontrol", "--version"])
        match = re.search(r"(\d+\.\d+\.\d+)", result.stdout)
        return Fetched(
            data=match.group(1) if match else None,
            command=result.shown,
            excerpt=result.stdout.strip(),
            error=_error(result),
        )

    def ping(self) -> Fetched[str | None]:
        """`scontrol ping`: whether the controller answers (that cluster's, with `-M`)."""
        result = self._run(["scontrol", "ping"])
        up = result.ok and "is UP" in result.stdout
        return Fetched(data=result.stdout.strip()[:300] if up else None, command=self._shown("scontrol ping"),
                       excerpt=(result.stdout + result.stderr).strip()[:300],
                       error="" if up else (_error(result) if not result.ok else result.stdout.strip()[:300]),
                       timed_out=result.timed_out)

    def private_data(self) -> Fetched[str | None]:
        """`PrivateData` of `scontrol show config`: what Slurm hides from users who are not operators."""
        result = self._run(["scontrol", "show", "config"])
        line = next((line for line in result.stdout.splitlines() if line.strip().startswith("PrivateData")), "")
        value = line.partition("=")[2].strip() if line else None
        return Fetched(data=value, command=self._shown("scontrol show config"), excerpt=line.strip(),
                       error="" if result.ok else _error(result))

    def job(self, *, job_id: str) -> Fetched[SlurmJob | None]:
        """`scontrol -d -o show job <id>`; None when the controller does not know the id."""
        result = self._run(["scontrol", "-d", "-o", "show", "job", job_id])
        shown = self._shown(f"scontrol show job {job_id}")
        if not result.ok:
            if any(marker in result.stderr for marker in _NOT_FOUND):
                return Fetched(data=None, command=shown, excerpt=result.stderr.strip())
            return Fetched(
                data=None,
                command=shown,
                excerpt=result.stderr.strip()[:2000],
                error=_error(result),
                timed_out=result.timed_out,
                truncated=result.truncated,
            )
        line = next((line for line in result.stdout.splitlines() if line.startswith("JobId=")), "")
        if not line:
            return Fetched(data=None, command=shown, excerpt=result.stdout[:2000], error="no JobId line")
        return Fetched(
            data=job_from_scontrol(line), command=shown, excerpt=line[:4000], truncated=result.truncated
        )

    def partition(self, *, name: str) -> Fetched[SlurmPartition | None]:
        """`scontrol -o show partition <name>`."""
        result = self._run(["scontrol", "-o", "show", "partition", name])
        shown = self._shown(f"scontrol show partition {name}")
        if not result.ok:
            return Fetched(
                data=None,
                command=shown,
                excerpt=result.stderr.strip()[:2000],
                error="" if any(m in result.stderr for m in _NOT_FOUND) else _error(result),
            )
        records = parse.parse_scontrol_records(result.stdout)
        return Fetched(
            data=partition_from_scontrol(records[0]) if records else None,
            command=shown,
            excerpt=result.stdout.strip()[:4000],
        )

    def partition_node_states(self, *, name: str) -> Fetched[dict[str, int]]:
        """`sinfo -h -p <p> -o '%T|%D'`: node counts per state (aggregated by sinfo, so small)."""
        argv = ["sinfo", "-h", "-p", name, "-o", "%T|%D"]
        result = self._run(argv)
        counts: dict[str, int] = {}
        for line in result.stdout.splitlines():
            state, _, count = line.partition("|")
            if count.strip().isdigit():
                key = state.strip().rstrip("*~#!%$@^-").lower()
                counts[key] = counts.get(key, 0) + int(count)
        return Fetched(
            data=counts,
            command=self._shown(f"sinfo -p {name} -o '%T %D'"),
            excerpt=result.stdout.strip()[:2000],
            error="" if result.ok else _error(result),
        )

    def nodes(self, *, names: list[str]) -> Fetched[list[SlurmNode]]:
        """`scontrol -o show node a,b,c` (one call for all names)."""
        if not names:
            return Fetched(data=[], command="scontrol show node")
        joined = ",".join(names)
        result = self._run(["scontrol", "-o", "show", "node", joined])
        shown = self._shown(f"scontrol show node {joined}")
        nodes = [
            node_from_scontrol(record)
            for record in parse.parse_scontrol_records(result.stdout)
            if "NodeName" in record
        ]
        return Fetched(
            data=nodes,
            command=shown,
            excerpt=result.stdout.strip()[:8000],
            error="" if result.ok else _error(result),
            truncated=result.truncated,
            timed_out=result.timed_out,
        )

    def steps(self, *, job_id: str) -> Fetched[list[SlurmStep]]:
        """`scontrol -o show step <id>` (live steps only)."""
        result = self._run(["scontrol", "-o", "show", "step", job_id])
        shown = self._shown(f"scontrol show step {job_id}")
        if not result.ok:
            return Fetched(
                data=[],
                command=shown,
                excerpt=result.stderr.strip()[:2000],
                error="" if "Invalid job id" in result.stderr else _error(result),
            )
        steps = [
            SlurmStep(
                step_id=record.get("StepId", ""),
                name=record.get("Name", ""),
                state=record.get("State", ""),
                nodelist=parse.value(record, "NodeList"),
                start=parse.parse_time(record.get("StartTime")),
            )
            for record in parse.parse_scontrol_records(result.stdout)
            if "StepId" in record
        ]
        return Fetched(data=steps, command=shown, excerpt=result.stdout.strip()[:4000])

    def accounting(self, *, job_id: str) -> Fetched[Accounting]:
        """`sacct -j <id> -P -n --format=...`; `enabled=False` when there is no accounting storage."""
        argv = ["sacct", "-j", job_id, "-P", "-n", "--format=" + ",".join(SACCT_COLUMNS)]
        result = self._run(argv)
        shown = self._shown(" ".join(argv))
        if result.missing:
            return Fetched(
                data=Accounting(enabled=False, message="sacct is not installed here"), command=shown
            )
        if not result.ok:
            message = (result.stderr or result.stdout).strip()
            if any(marker in message for marker in _ACCOUNTING_OFF):
                return Fetched(
                    data=Accounting(enabled=False, message=message[:500]),
                    command=shown,
                    excerpt=message[:500],
                )
            return Fetched(
                data=Accounting(enabled=False, message=message[:500]),
                command=shown,
                excerpt=message[:500],
                error=_error(result),
                timed_out=result.timed_out,
            )
        rows = parse.parse_sacct_parsable(result.stdout, columns=SACCT_COLUMNS)
        return Fetched(
            data=Accounting(enabled=True, steps=tuple(step_from_sacct(row) for row in rows)),
            command=shown,
            excerpt=result.stdout.strip()[:8000],
            truncated=result.truncated,
        )


def _error(result: RunResult) -> str:
    if result.missing:
        return f"{result.argv[0]} is not installed"
    if result.timed_out:
        return f"`{result.shown}` timed out"
    if result.ok:
        return ""
    return f"`{result.shown}` exited {result.returncode}: {result.stderr.strip()[:300]}"


def _int(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def job_from_scontrol(line: str) -> SlurmJob:
    """One `scontrol -d -o show job` line into the shared job shape."""
    record = parse.parse_scontrol_record(line)
    state = record.get("JobState", "")
    reason_raw = parse.value(record, "Reason")
    reason_code, unavailable = parse.parse_reason(reason_raw)
    exit_code, exit_signal = parse.parse_exit_code(record.get("ExitCode"))
    derived, _ = parse.parse_exit_code(record.get("DerivedExitCode"))
    tres = parse.parse_tres(parse.value(record, "TRES"))
    nodelist = parse.value(record, "NodeList")
    gres_req = next(
        (
            parse.value(record, key)
            for key in ("TresPerNode", "TresPerJob", "TresPerTask", "TresPerSocket")
            if parse.value(record, key)
        ),
        None,
    )
    # `-d` adds one `Nodes=<list> CPU_IDs=.. Mem=.. GRES=gpu:h200:1(IDX:0)` group per allocation.
    gres_alloc = tuple(
        match.group(2) for match in re.finditer(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=(\S+)", line)
    )
    time_limit = parse.value(record, "TimeLimit")
    user = record.get("UserId", "")
    return SlurmJob(
        job_id=record.get("JobId", ""),
        name=record.get("JobName", ""),
        user=user.split("(")[0],
        uid=int(uid.group(1)) if (uid := re.search(r"\((\d{1,10})\)$", user)) else None,
        state=state,
        reason_raw=reason_raw.replace("_", " ") if reason_raw else None,
        reason_code=reason_code,
        unavailable_nodes=tuple(unavailable),
        partition=parse.value(record, "Partition"),
        qos=parse.value(record, "QOS"),
        account=parse.value(record, "Account"),
        nodelist=nodelist,
        nodes=tuple(parse.expand_hostlist(nodelist, limit=1000)) if nodelist else (),
        req_nodes=tuple(parse.expand_hostlist(parse.value(record, "ReqNodeList") or "", limit=1000)),
        exc_nodes=tuple(parse.expand_hostlist(parse.value(record, "ExcNodeList") or "", limit=1000)),
        dependency=parse.value(record, "Dependency"),
        submit_time=parse.parse_time(record.get("SubmitTime")),
        eligible_time=parse.parse_time(record.get("EligibleTime")),
        start_time=parse.parse_time(record.get("StartTime")),
        end_time=parse.parse_time(record.get("EndTime")),
        time_limit=time_limit,
        time_limit_minutes=minutes_from_slurm_duration(time_limit),
        num_nodes=_int(record.get("NumNodes", "").split("-")[0] or None),
        num_cpus=_int(record.get("NumCPUs", "").split("-")[0] or None),
        # scontrol prints one TRES=: what was asked while pending, what was allocated once started.
        tres_req=tres if state == "PENDING" else {},
        tres_alloc={} if state == "PENDING" else tres,
        gres_req=gres_req,
        gres_alloc=gres_alloc,
        exit_code=exit_code,
        exit_signal=exit_signal,
        derived_exit_code=derived,
        batch_host=parse.value(record, "BatchHost"),
        restarts=_int(record.get("Restarts")),
        work_dir=parse.value(record, "WorkDir"),
        std_out=parse.value(record, "StdOut"),
        array_job_id=parse.value(record, "ArrayJobId"),
        array_task_id=parse.value(record, "ArrayTaskId"),
    )


def node_from_scontrol(record: dict[str, str]) -> SlurmNode:
    """One `scontrol -o show node` record; `Reason=text [user@time]` is split into its parts."""
    state_text = record.get("State", "")
    base, *flags = state_text.split("+")
    reason = parse.value(record, "Reason")
    set_by = reason_time = None
    if reason:
        match = re.match(r"^(.*?)\s*\[([^@\]]+)@([^\]]+)\]\s*$", reason)
        if match:
            reason, set_by, reason_time = match.group(1), match.group(2), match.group(3)
    return SlurmNode(
        name=record.get("NodeName", ""),
        state=base.rstrip("*"),
        state_flags=tuple(flag for flag in flags if flag)
        + (("NOT_RESPONDING",) if base.endswith("*") else ()),
        reason=reason,
        reason_set_by=set_by,
        reason_time=parse.parse_time(reason_time),
        gres=parse.value(record, "Gres"),
        gres_used=parse.value(record, "GresUsed"),
        cfg_tres=parse.parse_tres(parse.value(record, "CfgTRES")),
        alloc_tres=parse.parse_tres(parse.value(record, "AllocTRES")),
        partitions=tuple((parse.value(record, "Partitions") or "").split(","))
        if parse.value(record, "Partitions")
        else (),
    )


def partition_from_scontrol(record: dict[str, str]) -> SlurmPartition:
    """One `scontrol -o show partition` record."""
    max_nodes = parse.value(record, "MaxNodes")
    max_time = parse.value(record, "MaxTime")
    return SlurmPartition(
        name=record.get("PartitionName", ""),
        state=record.get("State", ""),
        nodes=parse.value(record, "Nodes"),
        total_nodes=_int(record.get("TotalNodes")),
        total_cpus=_int(record.get("TotalCPUs")),
        min_nodes=_int(record.get("MinNodes")),
        max_nodes=None if max_nodes in (None, "UNLIMITED") else _int(max_nodes),
        max_time=max_time,
        max_time_minutes=minutes_from_slurm_duration(max_time),
        default_time=parse.value(record, "DefaultTime"),
        allow_accounts=parse.value(record, "AllowAccounts"),
        allow_qos=parse.value(record, "AllowQos"),
        qos=parse.value(record, "QoS"),
        max_cpus_per_node=parse.value(record, "MaxCPUsPerNode"),
        max_mem_per_node=parse.value(record, "MaxMemPerNode"),
        tres=parse.parse_tres(parse.value(record, "TRES")),
    )


def step_from_sacct(row: dict[str, str]) -> SlurmStep:
    """One `sacct -P` row (job or step) into the step shape."""
    exit_code, exit_signal = parse.parse_exit_code(row.get("ExitCode"))
    return SlurmStep(
        step_id=row.get("JobID", ""),
        name=row.get("JobName", ""),
        # sacct writes `CANCELLED by 0`; keep the state word.
        state=(row.get("State", "") or "").split(" ")[0],
        exit_code=exit_code,
        exit_signal=exit_signal,
        nodelist=parse.value(row, "NodeList"),
        start=parse.parse_time(row.get("Start")),
        end=parse.parse_time(row.get("End")),
        elapsed=parse.value(row, "Elapsed"),
        max_rss=parse.value(row, "MaxRSS"),
        req_mem=parse.value(row, "ReqMem"),
    )
