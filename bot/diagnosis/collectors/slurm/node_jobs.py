"""The Slurm jobs running on one node now (a node triage's blast radius), through either backend, bounded.

CLI: `squeue -h -w <node> -t R,CG,S` (the controller filters by node). REST (v0.0.38 has no node filter):
`GET /jobs` read under the backend's byte cap and filtered here. Either way at most `max_items` jobs are kept.
"""

from __future__ import annotations

import dataclasses

from bot.diagnosis.collectors.bounded_run import run_bounded
from bot.diagnosis.collectors.slurm.model import Fetched, SlurmBackend

ACTIVE_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED", "RESIZING"})
SQUEUE_FORMAT = "%i|%u|%T|%j|%P|%D|%b|%M"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeJob:
    """One job with an allocation on the node."""

    job_id: str
    user: str
    state: str
    name: str
    partition: str
    nodes: int | None
    gres: str
    elapsed: str


def jobs_on_node(*, backend: SlurmBackend, node: str, timeout_seconds: float, max_bytes: int,
                 max_items: int) -> tuple[Fetched[list[NodeJob]], bool]:
    """(jobs, truncated): the jobs on `node` now, at most `max_items`; `node` is a validated single name."""
    if backend.name == "rest":
        return _rest(backend=backend, node=node, max_items=max_items)
    argv = ["squeue", "-h", "-w", node, "-t", "R,CG,S", "-o", SQUEUE_FORMAT]
    result = run_bounded(argv=argv, timeout_seconds=timeout_seconds, max_bytes=max_bytes,
                         env={"SLURM_TIME_FORMAT": "standard"})
    shown = f"squeue -w {node} -t R,CG,S -o '{SQUEUE_FORMAT}'"
    if not result.ok and "Invalid node name" in result.stderr:
        # squeue rewrites `-w localhost` to this host's name; read the active queue and filter by node list.
        return _filtered(node=node, timeout_seconds=timeout_seconds, max_bytes=max_bytes, max_items=max_items)
    if not result.ok:
        error = (f"{argv[0]} is not installed" if result.missing else f"`{shown}` timed out" if result.timed_out
                 else f"`{shown}` exited {result.returncode}: {result.stderr.strip()[:300]}")
        return Fetched(data=[], command=shown, error=error, timed_out=result.timed_out), False
    jobs, truncated = _parse(result.stdout, max_items=max_items)
    return Fetched(data=jobs, command=shown, excerpt=result.stdout[:4000],
                   truncated=result.truncated), truncated or result.truncated


def _filtered(*, node: str, timeout_seconds: float, max_bytes: int,
              max_items: int) -> tuple[Fetched[list[NodeJob]], bool]:
    from bot.diagnosis.collectors.slurm.parse import expand_hostlist

    argv = ["squeue", "-h", "-t", "R,CG,S", "-o", SQUEUE_FORMAT + "|%N"]
    result = run_bounded(argv=argv, timeout_seconds=timeout_seconds, max_bytes=max_bytes,
                         env={"SLURM_TIME_FORMAT": "standard"})
    shown = f"squeue -t R,CG,S -o '{SQUEUE_FORMAT}|%N'   # filtered to {node}"
    if not result.ok:
        return Fetched(data=[], command=shown, error=f"`{shown}` failed: {result.stderr.strip()[:300]}",
                       timed_out=result.timed_out), False
    lines = [line.rpartition("|") for line in result.stdout.splitlines()]
    kept = "\n".join(head for head, _, nodes in lines if node in expand_hostlist(nodes, limit=10_000))
    parsed, truncated = _parse(kept, max_items=max_items)
    return Fetched(data=parsed, command=shown, truncated=result.truncated), truncated or result.truncated


def _parse(text: str, *, max_items: int) -> tuple[list[NodeJob], bool]:
    jobs = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != 8:
            continue
        job_id, user, state, name, partition, count, gres, elapsed = parts
        jobs.append(NodeJob(job_id=job_id.strip(), user=user, state=state, name=name, partition=partition,
                            nodes=int(count) if count.strip().isdigit() else None,
                            gres="" if gres in ("N/A", "(null)") else gres, elapsed=elapsed))
    return jobs[:max_items], len(jobs) > max_items


def _rest(*, backend: SlurmBackend, node: str, max_items: int) -> tuple[Fetched[list[NodeJob]], bool]:
    from bot.diagnosis.collectors.slurm.rest import RestBackend, job_from_rest

    if not isinstance(backend, RestBackend):
        return Fetched(data=[], command="", error="this Slurm backend cannot list jobs"), False
    data, shown, error = backend.get_json("/jobs")
    if data is None:
        return Fetched(data=[], command=shown, error=error), False
    jobs = []
    for item in data.get("jobs") or []:
        job = job_from_rest(item)
        if node in job.nodes and job.state in ACTIVE_STATES:
            jobs.append(NodeJob(job_id=job.job_id, user=job.user, state=job.state, name=job.name,
                                partition=job.partition or "", nodes=job.num_nodes, gres=job.gres_req or "",
                                elapsed=""))
    return Fetched(data=jobs[:max_items], command=shown), len(jobs) > max_items
