"""Slurm pending reasons, classified: why a job waits (capacity, policy, nodes...) and what unblocks it.

Reason codes are the ones `squeue --help-reasons`/the squeue man page ("JOB REASON CODES") document.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class PendingReason:
    """One classified pending reason; `unblock` is the action that would let the job start."""

    code: str
    category: str
    meaning: str
    unblock: str
    who: str  # user | admin | time


CAPACITY = "capacity"
POLICY = "policy"
PARTITION = "partition"
NODES = "nodes"
DEPENDENCY = "dependency"
HELD = "held"
BEGIN_TIME = "begin_time"
RESERVATION = "reservation"
SUBMISSION = "submission"
UNKNOWN = "unknown"

_TABLE: dict[str, tuple[str, str, str, str]] = {
    "Resources": (
        CAPACITY,
        "The resources the job asks for are busy; it is next in line for them.",
        (
            "Wait for running jobs to end (see the estimated start), or ask for less (fewer GPUs/nodes, "
            "shorter time) so backfill can fit it."
        ),
        "user",
    ),
    "Priority": (
        POLICY,
        "Higher-priority jobs are queued ahead of it in this partition.",
        "Wait its turn; check `sprio -j <id>` and fairshare, or ask an admin for a priority/QOS change.",
        "admin",
    ),
    "Licenses": (
        CAPACITY,
        "The licenses it requests are all in use.",
        "Wait for licenses to free up.",
        "time",
    ),
    "Dependency": (
        DEPENDENCY,
        "It waits for another job named in --dependency.",
        (
            "Let the dependency finish (it starts by itself), or remove it: "
            "`scontrol update JobId=<id> Dependency=`."
        ),
        "user",
    ),
    "DependencyNeverSatisfied": (
        DEPENDENCY,
        "A job it depends on ended in a way that can never satisfy it.",
        ("Cancel and resubmit, or clear the dependency: `scontrol update JobId=<id> Dependency=`."),
        "user",
    ),
    "JobHeldUser": (
        HELD,
        "The user holds it (submitted with -H or `scontrol hold`).",
        "`scontrol release <id>`.",
        "user",
    ),
    "JobHeldAdmin": (
        HELD,
        "An administrator (or a failed launch) holds it.",
        "An admin runs `scontrol release <id>` once the cause is fixed.",
        "admin",
    ),
    "launch failed requeued held": (
        HELD,
        "The job failed to launch on its node, was requeued and held.",
        ("Look at the node it tried (drain reason, slurmd log), then `scontrol release <id>`."),
        "admin",
    ),
    "BeginTime": (
        BEGIN_TIME,
        "Its --begin time is in the future.",
        "Wait, or start now: `scontrol update JobId=<id> StartTime=now`.",
        "time",
    ),
    "PartitionDown": (
        PARTITION,
        "Its partition is DOWN: it accepts jobs but starts none.",
        (
            "An admin brings it up (`scontrol update PartitionName=<p> State=UP`), or move the job: "
            "`scontrol update JobId=<id> Partition=<other>`."
        ),
        "admin",
    ),
    "PartitionInactive": (
        PARTITION,
        "Its partition is INACTIVE.",
        "An admin sets the partition UP, or move the job to another partition.",
        "admin",
    ),
    "PartitionNodeLimit": (
        PARTITION,
        (
            "It asks for more nodes than the partition's MinNodes..MaxNodes allow, "
            "or the partition's nodes are unavailable."
        ),
        (
            "Ask for a node count inside the partition's limits "
            "(`scontrol update JobId=<id> NumNodes=<n>`) or use another partition."
        ),
        "user",
    ),
    "PartitionTimeLimit": (
        PARTITION,
        "Its time limit exceeds the partition's MaxTime.",
        ("Lower it: `scontrol update JobId=<id> TimeLimit=<within MaxTime>`, or use another partition."),
        "user",
    ),
    "PartitionConfig": (
        PARTITION,
        (
            "It asks for something the partition's configuration cannot give "
            "(e.g. more CPUs or memory than its nodes have)."
        ),
        "Resubmit within the partition's limits, or to a partition that fits.",
        "user",
    ),
    "ReqNodeNotAvail": (
        NODES,
        "Nodes it needs (requested with -w, or reserved) are down, drained or reserved.",
        (
            "Repair and resume those nodes (`scontrol update NodeName=<n> State=RESUME`), or "
            "drop them from the request (`-x <nodes>` / no `-w`)."
        ),
        "admin",
    ),
    "NodeDown": (
        NODES,
        "A node the job needs is down.",
        "Repair and resume the node, or requeue elsewhere.",
        "admin",
    ),
    "BadConstraints": (
        SUBMISSION,
        "Its constraints can never be satisfied by any node.",
        "Fix --constraint/--gres/--mem and resubmit.",
        "user",
    ),
    "InvalidQOS": (
        SUBMISSION,
        "Its QOS is not valid for its association.",
        "Submit with a QOS the account may use (`sacctmgr show assoc user=<u>`).",
        "user",
    ),
    "InvalidAccount": (SUBMISSION, "Its account is invalid.", "Submit with a valid --account.", "user"),
    "QOSNotAllowed": (SUBMISSION, "The partition does not allow its QOS.", "Use an allowed QOS.", "user"),
    "AccountNotAllowed": (
        SUBMISSION,
        "The partition does not allow its account.",
        "Use an allowed account.",
        "user",
    ),
    "Reservation": (
        RESERVATION,
        "It waits for its advanced reservation to become usable.",
        "Wait for the reservation window, or submit without --reservation.",
        "time",
    ),
    "ReqNodeNotAvail, Reserved for maintenance": (
        RESERVATION,
        "Its nodes are reserved for maintenance.",
        (
            "Wait for the maintenance window to end, or exclude those "
            "nodes / shorten the time limit to fit before it."
        ),
        "time",
    ),
    "JobArrayTaskLimit": (
        POLICY,
        "The array's %limit of running tasks is reached.",
        "Wait, or raise it: `scontrol update JobId=<id> ArrayTaskThrottle=<n>`.",
        "user",
    ),
    "PowerUpNode": (NODES, "Its nodes are powering up.", "Wait for the nodes to boot.", "time"),
    "Cleaning": (NODES, "It was requeued and Slurm is still cleaning up its previous run.", "Wait.", "time"),
    "FrontEndDown": (NODES, "No front-end node is available.", "An admin restores the front end.", "admin"),
    "SystemFailure": (
        NODES,
        "A Slurm, file system or network failure.",
        "An admin checks slurmctld.",
        "admin",
    ),
}


def classify_pending_reason(code: str | None) -> PendingReason:
    """Map one reason code (with its `, UnavailableNodes:...` tail removed) to category and unblock."""
    text = (code or "").strip()
    if text in _TABLE:
        category, meaning, unblock, who = _TABLE[text]
        return PendingReason(code=text, category=category, meaning=meaning, unblock=unblock, who=who)
    if text.startswith(("QOS", "Assoc", "MaxCpu", "MaxGRES", "MaxMem", "MaxNode", "MaxBB", "MaxLicense")):
        limit_kind = "QOS" if text.startswith("QOS") else "association"
        return PendingReason(
            code=text,
            category=POLICY,
            meaning=f"A {limit_kind} limit ({text}) holds it: the user, account or QOS is at its cap.",
            unblock=(
                "Wait for the same user/account/QOS's running jobs to end, ask for less, or ask an admin to "
                f"raise the limit (`sacctmgr show {'qos' if limit_kind == 'QOS' else 'assoc'}`)."
            ),
            who="admin",
        )
    return PendingReason(
        code=text,
        category=UNKNOWN,
        meaning=f"Slurm reason `{text}` is not in our table.",
        unblock="Read the reason in `man squeue` (JOB REASON CODES) and `scontrol show job <id>`.",
        who="admin",
    )
