"""Container log tails (tailLines + limitBytes), failing and restarting containers first, previous instance too."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from bot.diagnosis.collectors.kube.calls import observation
from bot.diagnosis.collectors.kube.context import KubeContext
from bot.diagnosis.engine import CollectorFailure, Sink

MAX_HEALTHY_CONTAINERS = 4
MAX_MATCHED_LINES = 25
TAIL_LINES_KEPT = 20
QUIET_WAITING = {"ContainerCreating", "PodInitializing"}

# Order matters: the first pattern that matches names the line.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nccl_warn", re.compile(r"NCCL WARN")),
    ("nccl_error", re.compile(r"NCCL error|ncclSystemError|ncclInternalError|ncclRemoteError", re.IGNORECASE)),
    ("ib_error", re.compile(r"\bibv_|\bmlx5_\d+.*(error|down)|RDMA.*(error|fail)", re.IGNORECASE)),
    ("xid", re.compile(r"\bXid\b", re.IGNORECASE)),
    ("gpu_oom", re.compile(r"CUDA out of memory|OutOfMemoryError: CUDA", re.IGNORECASE)),
    ("cuda_error", re.compile(r"CUDA error|cudaError|CUBLAS_STATUS|CUDNN_STATUS|device-side assert", re.IGNORECASE)),
    ("trt_error", re.compile(r"\[TRT\].*\[E\]|TensorRT.*(error|fail|mismatch)|deserializ\w+ .*fail", re.IGNORECASE)),
    ("oom", re.compile(r"out of memory|OOM|Killed process|MemoryError", re.IGNORECASE)),
    ("traceback", re.compile(r"^Traceback \(most recent call last\)")),
    ("connection_refused", re.compile(r"connection refused|ECONNREFUSED|no route to host", re.IGNORECASE)),
    ("http_5xx", re.compile(r"\bHTTP[/ ]\S*\s*5\d\d\b|\b50[234] (Service|Bad|Gateway)", re.IGNORECASE)),
    ("timeout", re.compile(r"timed out|timeout|deadline exceeded", re.IGNORECASE)),
    ("exception", re.compile(r"^\w*(Error|Exception)\b[:(]|^\s*raise ", re.MULTILINE)),
    ("error", re.compile(r"\b(error|fatal|panic|failed)\b", re.IGNORECASE)),
)
NCCL_HOST = re.compile(r"^(?P<host>[A-Za-z0-9][\w.-]*):\d+:\d+ ")
NCCL_PEER = re.compile(r"peer (?:(?P<ip>[0-9a-f.:]+)<\d+>(?: \((?P<named>[\w.-]+)\))?|(?P<host>[A-Za-z][\w.-]*))")
NCCL_HCA = re.compile(r"\b(?:hca )?(?P<hca>mlx5_\d+)\b")
NCCL_VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LogTarget:
    """One container whose log tail we read, and whether its previous instance matters.

    `never_started` containers (waiting for an image, for their init containers, for a config) have no log:
    no request is made for them; the report says why instead.
    """

    namespace: str
    pod: str
    container: str
    node: str | None
    previous: bool
    failing: bool
    role: str = "main"
    never_started: bool = False
    waiting_reason: str = ""


def choose_containers(ctx: KubeContext) -> list[LogTarget]:
    """Failing/restarting containers first (init, sidecar and main alike); a few healthy ones only when nothing
    is failing; containers that never started are listed (to say why no log was read), never requested."""
    from bot.diagnosis.collectors.kube.pods import container_roles, has_started

    failing, healthy, unstarted = [], [], []
    for pod in ctx.pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        roles = container_roles(pod)
        for item in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            state = item.get("state") or {}
            waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
            restarted = int(item.get("restartCount") or 0) > 0
            role = roles.get(item["name"], "main")
            is_failing = (restarted or (waiting and waiting.get("reason") not in QUIET_WAITING)
                          or (terminated and terminated.get("exitCode") not in (0, None)))
            started = has_started(item)
            entry = LogTarget(namespace=meta["namespace"], pod=meta["name"], container=item["name"],
                              node=(pod.get("spec") or {}).get("nodeName"), previous=restarted,
                              failing=bool(is_failing), role=role, never_started=not started,
                              waiting_reason=str(waiting.get("reason") or ""))
            if not started:
                unstarted.append(entry)  # no request: the report says why there is no log
            else:
                (failing if is_failing else healthy).append(entry)
    return failing + healthy[: 0 if failing else MAX_HEALTHY_CONTAINERS] + unstarted


def collect_log(ctx: KubeContext, sink: Sink, *, target: LogTarget) -> None:
    """Read the tail of one container (previous instance first when it restarted); say why when there is none."""
    if target.never_started:
        why = (f"{target.role if target.role != 'main' else ''} container {target.container} in {target.pod} "
               f"never started (waiting: {target.waiting_reason or 'unknown'}): it has no log to read").strip()
        sink.note(f"no log for {target.pod}/{target.container}: never started ({target.waiting_reason})")
        sink.observe(observation(
            kind="log_skipped", subject=f"pod/{target.namespace}/{target.pod}", text=why,
            command=f"kubectl describe pod -n {target.namespace} {target.pod}",
            fields={"container": target.container, "role": target.role, "reason": "never started",
                    "waiting_reason": target.waiting_reason, "node": target.node}))
        return
    hosts = ctx.host_nodes()
    for previous in ((True, False) if target.previous else (False,)):
        try:
            _read_one(ctx, sink, target=target, previous=previous, hosts=hosts)
        except CollectorFailure as exc:
            if not (previous and "HTTP 400" in exc.detail):
                raise
            sink.note(f"no previous log kept for {target.pod}/{target.container}")


def resolve_host(name: Any, hosts: dict[str, str]) -> str | None:
    """The node behind a host name a log uses (pod name, hostname, FQDN, pod or node IP); None if unknown."""
    if not name:
        return None
    text = str(name)
    return hosts.get(text) or hosts.get(text.split(".", 1)[0])


def _read_one(ctx: KubeContext, sink: Sink, *, target: LogTarget, previous: bool, hosts: dict[str, str]) -> None:
    bounds = ctx.caller.budget.bounds
    allowed = ctx.caller.budget.take_evidence_bytes(bounds.max_log_bytes_per_container)
    if allowed <= 0:
        sink.truncate("total evidence bytes cap reached before this log")
        return
    text = ctx.caller.get("/api/v1/namespaces/{namespace}/pods/{name}/log", text=True,
                          path_params={"namespace": target.namespace, "name": target.pod},
                          query={"container": target.container, "previous": previous,
                                 "tailLines": bounds.max_log_lines_per_container, "limitBytes": allowed},
                          what=f"logs {target.namespace}/{target.pod} -c {target.container}"
                               + (" --previous" if previous else ""),
                          max_bytes=allowed)  # read no more than limitBytes asked for, whatever the server sends
    text = text if isinstance(text, str) else str(text)
    size = len(text.encode())
    # The reservation stood for the raw log; what is kept is charged again as observations below.
    ctx.caller.budget.refund_evidence_bytes(allowed)
    sink.count(1)
    truncated = size >= allowed
    if truncated:
        # Say which bound cut it: other collectors may have used most of the total allowance first.
        cause = ("total evidence bytes cap reached" if allowed < bounds.max_log_bytes_per_container
                 else "per-container log bytes cap")
        sink.truncate(f"log of {target.pod}/{target.container} cut at {allowed} bytes ({cause})")
    subject = f"pod/{target.namespace}/{target.pod}"
    command = (f"kubectl logs -n {target.namespace} {target.pod} -c {target.container}"
               f"{' --previous' if previous else ''} --tail={bounds.max_log_lines_per_container}")
    lines = text.splitlines()
    matched = 0
    for line in lines:
        fields = classify_line(line)
        if fields is None:
            continue
        matched += 1
        if matched > MAX_MATCHED_LINES:
            sink.truncate(f"more than {MAX_MATCHED_LINES} notable lines in {target.pod}/{target.container}")
            break
        fields.update({"container": target.container, "previous": previous, "node": target.node,
                       "role": target.role})
        # Scope counts nodes, not names: a pod's hostname, its IP and its node are one place.
        if fields.get("host"):
            fields["host_node"] = resolve_host(fields["host"], hosts)
        if fields.get("peer"):
            fields["peer_node"] = resolve_host(fields["peer"], hosts) or resolve_host(fields.get("peer_ip"), hosts)
        sink.observe(observation(kind="log_line", subject=subject, command=command, fields=fields,
                                 text=line[:1000]))
    tail = "\n".join(lines[-TAIL_LINES_KEPT:])
    sink.observe(observation(
        kind="log_tail", subject=subject, command=command, text=tail,
        fields={"container": target.container, "previous": previous, "lines": len(lines), "bytes": size,
                "truncated": truncated, "node": target.node, "role": target.role}))


def classify_line(line: str) -> dict[str, Any] | None:
    """Name a notable log line (NCCL, Xid, CUDA, TensorRT, OOM...) and pull host/peer/HCA out of NCCL lines."""
    for name, pattern in PATTERNS:
        if pattern.search(line):
            fields: dict[str, Any] = {"line": line[:1000], "pattern": name}
            if name.startswith("nccl") or "NCCL" in line:
                host, peer, hca = NCCL_HOST.match(line), NCCL_PEER.search(line), NCCL_HCA.search(line)
                version = NCCL_VERSION.search(line)
                if host:
                    fields["host"] = host.group("host")
                if peer:
                    fields["peer"] = peer.group("named") or peer.group("host") or peer.group("ip")
                    if peer.group("ip"):
                        fields["peer_ip"] = peer.group("ip")
                if hca:
                    fields["hca"] = hca.group("hca")
                if version:
                    fields["nccl_version"] = version.group("version")
            return fields
    return None
