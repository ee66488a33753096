"""Fabric evidence from logs already collected: NCCL transport errors and collective timeouts, mapped to
hosts and peers, and a scope decision (node-local / path-local / fabric-wide) in the seeds' terms.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime

from bot.evidence import findings

SOURCE = "fabric"

# `host:pid:tid [dev]` prefix NCCL puts on every line.
# `host:pid:tid [dev]`, at the line start or after a prefix such as NCCL 2.28's `[2026-11-29 22:44:37] `.
_PREFIX = re.compile(r"(?:^|\s)(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]")
_IB_COMPLETION = re.compile(
    r"NET/IB\w* ?: Got completion from peer (?P<peer>[0-9A-Fa-f.:]+)<(?P<port>\d+)>(?: \((?P<peer_name>[^)]+)\))?"
    r" with (?:error|status)[ =](?P<status>\d+),? opcode[ =](?P<opcode>\d+),? len[ =](?P<len>\d+),?"
    r" vendor err (?P<vendor>\d+)(?: \((?P<dir>\w+)\))?"
    r"(?:.*?localGid (?P<lgid>\S+))?(?:.*?remoteGids? ?(?P<rgid>\S+))?(?:.*?hca (?P<hca>\S+))?"
)
_ASYNC = re.compile(r"NET/IB\w* ?: (?P<hca>mlx5_\d+):(?P<port>\d+) async event: (?P<event>[^,]+)")
_IBV = re.compile(r"\b(?P<call>ibv_\w+)\b.*?(?:failed|error)[^\n]*?(?:errno (?P<errno>\d+))?", re.IGNORECASE)
_SOCKET = re.compile(
    r"(?:NET/Socket|socket\w*|bootstrap\w*)\b.*?(?P<what>Connection refused|Connection reset by peer|Connection "
    r"closed by remote peer|Connection timed out|No route to host|failed|timed out)"
    r"(?:.*?(?P<peer>\d+\.\d+\.\d+\.\d+)<(?P<port>\d+)>)?",
    re.IGNORECASE,
)
_WATCHDOG = re.compile(
    r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+))?(?:, NumelOut=\d+)?, Timeout\(ms\)=(?P<timeout>\d+)\)"
)
_RANK_PREFIX = re.compile(r"\[rank(?P<rank>\d+)\]")
_NCCL_WARN = re.compile(r"NCCL WARN (?P<msg>.*)$")
_OOB = re.compile(r"(?:OOB|Bootstrap : Using|NET/Socket : Using \[\d+\])\s*\w+:(?P<ip>\d+\.\d+\.\d+\.\d+)<")

# ibv_wc_status values (verbs.h) that NCCL prints as `status=<n>`.
IBV_WC_STATUS = {
    1: "IBV_WC_LOC_LEN_ERR",
    2: "IBV_WC_LOC_QP_OP_ERR",
    3: "IBV_WC_LOC_EEC_OP_ERR",
    4: "IBV_WC_LOC_PROT_ERR",
    5: "IBV_WC_WR_FLUSH_ERR",
    6: "IBV_WC_MW_BIND_ERR",
    7: "IBV_WC_BAD_RESP_ERR",
    8: "IBV_WC_LOC_ACCESS_ERR",
    9: "IBV_WC_REM_INV_REQ_ERR",
    10: "IBV_WC_REM_ACCESS_ERR",
    11: "IBV_WC_REM_OP_ERR",
    12: "IBV_WC_RETRY_EXC_ERR",
    13: "IBV_WC_RNR_RETRY_EXC_ERR",
    14: "IBV_WC_LOC_RDD_VIOL_ERR",
    15: "IBV_WC_REM_INV_RD_REQ_ERR",
    16: "IBV_WC_REM_ABORT_ERR",
    17: "IBV_WC_INV_EECN_ERR",
    18: "IBV_WC_INV_EEC_STATE_ERR",
    19: "IBV_WC_FATAL_ERR",
    20: "IBV_WC_RESP_TIMEOUT_ERR",
    21: "IBV_WC_GENERAL_ERR",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class NcclEvent:
    """One fabric-relevant line from an NCCL/PyTorch log."""

    error_type: str  # ib_completion | ib_async | ibv | socket | watchdog_timeout | nccl_error
    host: str
    line: str
    rank: int | None = None
    pid: int | None = None
    device: int | None = None
    peer: str | None = None
    peer_ip: str | None = None
    peer_host: str | None = None
    hca: str | None = None
    port: str | None = None
    status: int | None = None
    opcode: int | None = None
    length: int | None = None
    vendor_err: int | None = None
    local_gid: str | None = None
    remote_gid: str | None = None
    op_type: str | None = None
    seq_num: int | None = None
    numel_in: int | None = None
    timeout_ms: int | None = None
    op: str | None = None


def learn_ip_hosts(text: str) -> dict[str, str]:
    """IP -> host from NCCL's own INFO lines (`OOB eth0:10.0.1.13<0>`, `Bootstrap : Using eth0:...`)."""
    table: dict[str, str] = {}
    for line in text.splitlines():
        prefix = _PREFIX.search(line[:200])
        found = _OOB.search(line)
        if prefix and found:
            table.setdefault(found.group("ip"), prefix.group("host"))
    return table


# `comm 0x.. rank R nranks N`; NCCL 2.28 prefixes it with the init function (`ncclCommInitRankConfig comm 0x..`).
_INIT = re.compile(r"NCCL INFO (?:\w+ )?comm 0x[0-9a-f]+ rank (?P<rank>\d+) nranks \d+")


def learn_process_ranks(text: str) -> dict[tuple[str, int], int]:
    """(host, pid) -> global rank from NCCL's `comm 0x.. rank R nranks N ... Init COMPLETE` lines."""
    table: dict[tuple[str, int], int] = {}
    for line in text.splitlines():
        prefix = _PREFIX.search(line[:200])
        found = _INIT.search(line)
        if prefix and found:
            table.setdefault((prefix.group("host"), int(prefix.group("pid"))), int(found.group("rank")))
    return table


def parse_nccl_log(text: str, *, host: str, max_events: int = 1000) -> list[NcclEvent]:
    """Fabric-relevant events in one log; `host` is the node/pod that produced it (lines may name their own)."""
    events: list[NcclEvent] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        prefix = _PREFIX.search(line[:200])
        line_host = prefix.group("host") if prefix else host
        common = {
            "host": line_host or host,
            "line": line[:600],
            "pid": int(prefix.group("pid")) if prefix else None,
            "device": int(prefix.group("dev")) if prefix else None,
        }
        rank_match = _RANK_PREFIX.search(line)
        rank = int(rank_match.group("rank")) if rank_match else None
        event: NcclEvent | None = None
        if match := _IB_COMPLETION.search(line):
            status = int(match.group("status"))
            event = NcclEvent(
                error_type="ib_completion",
                rank=rank,
                peer=f"{match.group('peer')}<{match.group('port')}>",
                peer_ip=match.group("peer"),
                peer_host=match.group("peer_name"),
                hca=match.group("hca"),
                status=status,
                opcode=int(match.group("opcode")),
                length=int(match.group("len")),
                vendor_err=int(match.group("vendor")),
                local_gid=match.group("lgid"),
                remote_gid=match.group("rgid"),
                op="ib",
                **common,
            )
        elif match := _ASYNC.search(line):
            event = NcclEvent(
                error_type="ib_async",
                rank=rank,
                hca=match.group("hca"),
                port=match.group("port"),
                op="ib",
                **common,
            )
        elif match := _WATCHDOG.search(line):
            event = NcclEvent(
                error_type="watchdog_timeout",
                rank=int(match.group("rank")),
                op_type=match.group("op"),
                seq_num=int(match.group("seq")),
                numel_in=int(match.group("numel")) if match.group("numel") else None,
                timeout_ms=int(match.group("timeout")),
                op="collective",
                **common,
            )
        elif "NCCL WARN" in line or "NCCL error" in line or "ibv_" in line:
            if match := _IBV.search(line):
                event = NcclEvent(error_type="ibv", rank=rank, op="ib", hca=_hca_in(line), **common)
            elif match := _SOCKET.search(line):
                peer_ip = match.group("peer")
                event = NcclEvent(
                    error_type="socket",
                    rank=rank,
                    peer_ip=peer_ip,
                    peer=f"{peer_ip}<{match.group('port')}>" if peer_ip else None,
                    op="bootstrap" if "bootstrap" in line.lower() else "socket",
                    **common,
                )
            else:
                event = NcclEvent(error_type="nccl_error", rank=rank, hca=_hca_in(line), op="nccl", **common)
        if event:
            events.append(event)
            if len(events) >= max_events:
                break
    return events


def _hca_in(line: str) -> str | None:
    match = re.search(r"\b(mlx5_\d+|ibp\w+|bnxt_re\d+|irdma\d+)\b", line)
    return match.group(1) if match else None


def resolve_peers(
    events: Iterable[NcclEvent],
    *,
    ip_hosts: Mapping[str, str],
    rank_hosts: Mapping[int, str] | None = None,
    process_ranks: Mapping[tuple[str, int], int] | None = None,
) -> list[NcclEvent]:
    """Fill `peer_host` from the IP table, `rank` from the process's NCCL init line, `host` from rank placement."""
    resolved = []
    for event in events:
        peer_host = event.peer_host or (ip_hosts.get(event.peer_ip) if event.peer_ip else None)
        rank = event.rank
        if rank is None and process_ranks and event.pid is not None:
            rank = process_ranks.get((event.host, event.pid))
        host = event.host
        if rank_hosts and rank is not None and not host:
            host = rank_hosts.get(rank, host)
        resolved.append(dataclasses.replace(event, peer_host=peer_host, host=host, rank=rank))
    return resolved


def to_nodes(events: Iterable[NcclEvent], *, host_nodes: Mapping[str, str]) -> list[NcclEvent]:
    """Each event's host and peer as the node they run on (a pod's hostname and its node are one place)."""

    def node(name: str | None) -> str | None:
        if not name:
            return name
        return host_nodes.get(name) or host_nodes.get(name.split(".", 1)[0]) or name

    return [dataclasses.replace(event, host=node(event.host) or event.host,
                                peer_host=node(event.peer_host) or (host_nodes.get(event.peer_ip or "") or None))
            for event in events]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScopeDecision:
    """Where the fabric fault lives, with the reason in words."""

    scope: str  # node-local | path-local | fabric-wide | unknown
    hosts: tuple[str, ...]
    reason: str
    pair: tuple[str, str] | None = None
    suspect_host: str | None = None
    suspect_hca: str | None = None
    error_count: int = 0


def decide_scope(events: Iterable[NcclEvent]) -> ScopeDecision:
    """Transport errors between hosts: one pair -> path-local; one host in every pair -> node-local; else wide."""
    transport = [
        event for event in events if event.error_type in {"ib_completion", "ib_async", "ibv", "socket"}
    ]
    timeouts = [event for event in events if event.error_type == "watchdog_timeout"]
    hosts = tuple(
        sorted({event.host for event in transport} | {e.peer_host for e in transport if e.peer_host})
    )
    hcas = Counter((event.host, event.hca) for event in transport if event.hca)
    top_hca = hcas.most_common(1)[0][0] if hcas else None
    if not transport:
        if timeouts:
            return ScopeDecision(
                scope="unknown",
                hosts=tuple(sorted({e.host for e in timeouts})),
                error_count=len(timeouts),
                reason="only collective timeouts: they show ranks waited, not which link failed; "
                "look for the rank that never reached the collective",
            )
        return ScopeDecision(scope="unknown", hosts=(), reason="no fabric errors in the logs read")
    edges = {
        frozenset((event.host, event.peer_host))
        for event in transport
        if event.peer_host and event.peer_host != event.host
    }
    if len(edges) == 1:
        left, right = sorted(next(iter(edges)))
        return ScopeDecision(
            scope="path-local",
            hosts=hosts,
            pair=(left, right),
            error_count=len(transport),
            suspect_hca=top_hca[1] if top_hca else None,
            reason=f"every transport error is between {left} and {right}: test that path "
            "(ib_write_bw) and both ends' HCA ports",
        )
    if edges:
        common = set.intersection(*(set(edge) for edge in edges))
        if len(common) == 1:
            suspect = next(iter(common))
            suspect_hcas = Counter(e.hca for e in transport if e.host == suspect and e.hca)
            return ScopeDecision(
                scope="node-local",
                hosts=hosts,
                suspect_host=suspect,
                error_count=len(transport),
                suspect_hca=suspect_hcas.most_common(1)[0][0] if suspect_hcas else None,
                reason=f"{suspect} is on every failing path ({len(edges)} peers): suspect its HCA/cable/port",
            )
        return ScopeDecision(
            scope="fabric-wide",
            hosts=hosts,
            error_count=len(transport),
            reason=f"errors on {len(edges)} host pairs with no common host: suspect the "
            "switch/fabric (UFM, subnet manager, congestion)",
        )
    reporting = {event.host for event in transport}
    if len(reporting) == 1:
        suspect = next(iter(reporting))
        return ScopeDecision(
            scope="node-local",
            hosts=hosts,
            suspect_host=suspect,
            error_count=len(transport),
            suspect_hca=top_hca[1] if top_hca and top_hca[0] == suspect else None,
            reason=f"only {suspect} reports transport errors and no peer is named",
        )
    return ScopeDecision(
        scope="fabric-wide" if len(reporting) >= 3 else "unknown",
        hosts=hosts,
        error_count=len(transport),
        reason=f"{len(reporting)} hosts report transport errors without naming peers",
    )


def fabric_observations(
    *,
    logs: Mapping[str, str],
    observed_at: datetime,
    rank_hosts: Mapping[int, str] | None = None,
    ip_hosts: Mapping[str, str] | None = None,
    subject: str = "logs",
    max_events: int = 500,
    host_nodes: Mapping[str, str] | None = None,
) -> list[findings.Observation]:
    """`logs` maps host (node or pod's node) -> log text; returns nccl_error events and one fabric_scope.

    `host_nodes` maps the names logs use for a host (pod name, hostname, pod IP) to its node, so scope is
    decided over distinct nodes.
    """
    learned: dict[str, str] = {}
    ranks: dict[tuple[str, int], int] = {}
    for text in logs.values():
        learned.update(learn_ip_hosts(text))
        ranks.update(learn_process_ranks(text))
    learned.update(ip_hosts or {})
    events: list[NcclEvent] = []
    for host, text in logs.items():
        events.extend(parse_nccl_log(text, host=host, max_events=max_events - len(events)))
        if len(events) >= max_events:
            break
    events = resolve_peers(events, ip_hosts=learned, rank_hosts=rank_hosts, process_ranks=ranks)
    if host_nodes:
        events = to_nodes(events, host_nodes=host_nodes)
    result = [_event_observation(event, observed_at=observed_at) for event in events]
    decision = decide_scope(events)
    if events:
        result.append(
            findings.Observation(
                source=SOURCE,
                kind="fabric_scope",
                subject=subject,
                text=f"Fabric scope {decision.scope}: {decision.reason}",
                command="grep -E 'NCCL WARN|Watchdog' <logs>",
                observed_at=observed_at,
                fields={
                    "scope": decision.scope,
                    "hosts": list(decision.hosts),
                    "pair": list(decision.pair) if decision.pair else None,
                    "suspect_host": decision.suspect_host,
                    "suspect_hca": decision.suspect_hca,
                    "error_count": decision.error_count,
                    "reason": decision.reason,
                    "layer": "fabric",
                },
            )
        )
    return result


def _event_observation(event: NcclEvent, *, observed_at: datetime) -> findings.Observation:
    status_text = IBV_WC_STATUS.get(event.status) if event.status is not None else None
    text = event.line
    if status_text:
        text = f"{event.line} [{status_text}]"
    return findings.Observation(
        source=SOURCE,
        kind="nccl_error",
        subject=f"rank:{event.rank}" if event.rank is not None else f"host:{event.host}",
        text=text,
        command="grep -E 'NCCL WARN|Watchdog' <log>",
        observed_at=observed_at,
        fields={
            "error_type": event.error_type,
            "host": event.host,
            "node": event.host,
            "rank": event.rank,
            "pid": event.pid,
            "device": event.device,
            "peer": event.peer,
            "peer_ip": event.peer_ip,
            "peer_host": event.peer_host,
            "hca": event.hca,
            "port": event.port,
            "status": event.status,
            "status_text": status_text,
            "opcode": event.opcode,
            "len": event.length,
            "vendor_err": event.vendor_err,
            "local_gid": event.local_gid,
            "remote_gid": event.remote_gid,
            "op_type": event.op_type,
            "seq_num": event.seq_num,
            "numel_in": event.numel_in,
            "timeout_ms": event.timeout_ms,
            "op": event.op,
            "line": event.line,
            "layer": "fabric",
        },
    )
