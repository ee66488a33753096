"""Node triage: collect one node's evidence under the snapshot engine, and say what to do about it.

`collect` runs the Kubernetes or Slurm node plan (diagnose() classifies and redacts, as for a job).
`next_steps` turns the verdict and the evidence into the exact commands a responder would run (cordon,
drain, `scontrol update ... State=DRAIN`, GPU reset, diagnostics, RMA evidence, return to service) as one
plain-data finding. The bot shows them; it never runs them.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from typing import Any

from bot.config import Settings
from bot.diagnosis import engine
from bot.diagnosis.knowledge import xid as gpu_xid
from bot.diagnosis.service import TargetNotFound
from bot.evidence.findings import (
    CollectorOutcome,
    Evidence,
    Finding,
    Observation,
    Scope,
    Severity,
    utcnow,
)
from bot.evidence.node_targets import NodeTarget
from bot.evidence.report import Diagnosis
from bot.evidence.targets import Platform

RULE = "node.next-steps"
MAX_NAMED_WORKLOADS = 5


class NodeNotFound(TargetNotFound):
    """The cluster (or Slurm) has no node of that name."""


def collect(*, target: NodeTarget, settings: Settings, budget: engine.Budget, api_client: Any = None,
            slurm_backend: Any = None) -> tuple[engine.SnapshotResult, str, dict[str, str]]:
    """(result, target_kind, placement) for one node; raises NodeNotFound or ClusterUnreachable."""
    if target.platform is Platform.SLURM:
        return _slurm(target=target, settings=settings, budget=budget, backend=slurm_backend)
    return _kubernetes(target=target, settings=settings, budget=budget, api_client=api_client)


def _kubernetes(*, target: NodeTarget, settings: Settings, budget: engine.Budget,
                api_client: Any) -> tuple[engine.SnapshotResult, str, dict[str, str]]:
    from bot.diagnosis.collectors.kube import calls as kube_calls
    from bot.diagnosis.collectors.kube import node_plan

    try:
        api = api_client or kube_calls.build_api_client(
            kubeconfig=settings.kubeconfig, context=settings.kube_context, in_cluster=settings.in_cluster,
            pool_size=budget.bounds.max_concurrency)
    except Exception as exc:
        raise kube_calls.ClusterUnreachable(
            f"no Kubernetes credentials ({exc}); set KUBECONFIG, or TRIAGE_IN_CLUSTER=true inside a cluster"
        ) from exc
    ctx = node_plan.context_for(target=target, settings=settings, caller=kube_calls.Caller(api=api, budget=budget))
    try:
        result = engine.run_snapshot(stages=node_plan.plan(ctx), budget=budget)
    finally:
        if api_client is None:
            api.close()
    if ctx.kube.unreachable:
        raise kube_calls.ClusterUnreachable(ctx.kube.unreachable)
    report = next((item for item in result.reports if item.name == "node"), None)
    if ctx.node is None and report is not None and report.outcome is CollectorOutcome.OK:
        raise NodeNotFound(f"the cluster has no node named {target.name} (`kubectl get nodes` lists them)")
    return result, target.kind_label, {}


def _slurm(*, target: NodeTarget, settings: Settings, budget: engine.Budget,
           backend: Any) -> tuple[engine.SnapshotResult, str, dict[str, str]]:
    from bot.diagnosis.collectors.slurm import collector as slurm
    from bot.diagnosis.collectors.slurm import node_plan

    if backend is None:
        try:
            backend = slurm.make_backend(settings=settings)
        except ValueError as error:
            reason = str(error)
            skipped = engine.Step(collector="slurm.node",
                                  run=lambda sink: sink.mark(CollectorOutcome.SKIPPED, reason))
            return engine.run_snapshot(stages=[lambda: [skipped]], budget=budget), target.kind_label, {}
    ctx = node_plan.SlurmNodeContext(target=target, backend=backend, settings=settings, budget=budget)
    result = engine.run_snapshot(stages=node_plan.plan(ctx), budget=budget)
    if any(item.kind == "slurm_node_not_found" for item in result.observations):
        raise NodeNotFound(f"Slurm has no node named {target.name} (`sinfo -N` lists them)")
    return result, target.kind_label, ctx.placement


# --- next steps -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Step:
    command: str
    why: str


def next_steps(*, target: NodeTarget, observations: Sequence[Observation], diagnosis: Diagnosis) -> list[Finding]:
    """The runbook for this node as one finding (empty for a healthy, schedulable node)."""
    facts = _Facts.of(target=target, observations=observations, diagnosis=diagnosis)
    steps = _slurm_steps(facts) if target.platform is Platform.SLURM else _kubernetes_steps(facts)
    if not steps:
        return []
    now = utcnow()
    summary = (f"Next steps for {target.kind_label} {target.name}, shown here and never run by the bot: "
               + "; ".join(step.why.split(":")[0] for step in steps))
    return [Finding(
        layer=diagnosis.verdict.layer, rule=RULE, severity=Severity.INFO, summary=summary[:900],
        subject=target.key, scope=Scope.NODE_LOCAL if facts.faulty else None,
        next_step=" ; ".join(step.command for step in steps),
        evidence=tuple(Evidence(source="triage-bot", command=step.command, excerpt=step.why, observed_at=now)
                       for step in steps))]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Facts:
    """What the runbook needs from the evidence."""

    name: str
    faulty: bool
    gpu_fault: bool
    not_ready: bool
    cordoned: bool
    drained: bool
    xids: tuple[int, ...]
    gpu_ids: tuple[str, ...]
    failing_stack: tuple[str, ...]
    workloads: tuple[str, ...]
    workload_count: int
    pods: int
    reason_text: str

    @classmethod
    def of(cls, *, target: NodeTarget, observations: Sequence[Observation], diagnosis: Diagnosis) -> _Facts:
        rules = {item.rule for item in diagnosis.findings}
        xids: list[int] = []
        gpu_ids: list[str] = []
        for obs in observations:
            if obs.kind == "gpu_xid" and isinstance(obs.fields.get("xid"), int):
                xids.append(obs.fields["xid"])
                gpu_ids.append(str(obs.fields.get("gpu_pci") or obs.fields.get("gpu_index") or ""))
            elif obs.kind == "event":
                for found in gpu_xid.parse_kernel_xids(obs.text, limit=20):
                    xids.append(found.code)
                    gpu_ids.append(found.gpu_pci)
            elif obs.kind == "gpu_health" and obs.fields.get("gpu_index") not in (None, ""):
                gpu_ids.append(str(obs.fields["gpu_index"]))
        status = next((obs for obs in observations if obs.kind in ("node_status", "slurm_node")), None)
        fields = status.fields if status is not None else {}
        radius = next((obs for obs in observations if obs.kind == "node_blast_radius"), None)
        listed = [obs.subject for obs in observations if obs.kind == "node_workload"]
        failing_stack = tuple(sorted({obs.subject.removeprefix("pod/") for obs in observations
                                      if obs.kind == "container_state" and _container_failing(obs)}))
        gpu_fault = any(rule.startswith(("runtime.gpu", "runtime.dcgm", "runtime.nvlink")) for rule in rules) or bool(xids)
        not_ready = "runtime.node-not-ready" in rules or str(fields.get("full_state", "")).find("NOT_RESPONDING") >= 0
        reason = (diagnosis.verdict.summary.split(":", 1)[-1].strip() if diagnosis.verdict.layer else "")
        return cls(
            name=target.name, faulty=diagnosis.verdict.layer is not None, gpu_fault=gpu_fault, not_ready=not_ready,
            cordoned=bool(fields.get("cordoned")), drained=bool(fields.get("drained")),
            xids=tuple(dict.fromkeys(xids)), gpu_ids=tuple(item for item in dict.fromkeys(gpu_ids) if item),
            failing_stack=failing_stack, workloads=tuple(listed),
            workload_count=int((radius.fields.get("workloads") if radius else 0) or 0),
            pods=int((radius.fields.get("pods") if radius else 0) or 0), reason_text=reason)

    def named_workloads(self) -> str:
        shown = ", ".join(self.workloads[:MAX_NAMED_WORKLOADS])
        more = self.workload_count - min(len(self.workloads), MAX_NAMED_WORKLOADS)
        return shown + (f" (+{more} more)" if more > 0 else "") if shown else "nothing"

    def xid_text(self) -> str:
        return ", ".join(f"Xid {code} ({gpu_xid.lookup(code).name})" for code in self.xids)


def _container_failing(obs: Observation) -> bool:
    state, reason = str(obs.fields.get("state") or ""), str(obs.fields.get("reason") or "")
    return (state == "waiting" and reason not in ("", "ContainerCreating", "PodInitializing")) or (
        state == "terminated" and obs.fields.get("exit_code") not in (0, None))


def _gpu_steps(facts: _Facts, *, run_on: str) -> list[_Step]:
    """Reset, diagnose and RMA evidence: the same on both platforms (`run_on` is how to reach the node)."""
    steps = []
    hard_reset = any(code in (79, 119, 120, 154) for code in facts.xids)
    target_gpu = next((item for item in facts.gpu_ids if item.isdigit() or item.startswith("0000:")), "<gpu>")
    if hard_reset:
        steps.append(_Step(command=f"{run_on} 'sudo reboot'",
                           why=f"power-cycle or reboot: {facts.xid_text()} leaves the GPU unreachable until the node "
                               "restarts (a GPU reset does not bring it back)"))
    else:
        steps.append(_Step(command=f"{run_on} 'sudo nvidia-smi -r -i {target_gpu}'",
                           why="GPU reset: only once no process uses the GPU (after the drain); applies pending row "
                               "remaps and clears the error state"))
    steps.append(_Step(command=f"{run_on} 'sudo dcgmi diag -r 3'",
                       why="diagnose: every DCGM level-3 test must pass before the node takes work again"))
    steps.append(_Step(
        command=(f"{run_on} 'sudo nvidia-bug-report.sh --output-file /tmp/{facts.name}-nvidia-bug-report.log.gz; "
                 f"nvidia-smi -q > /tmp/{facts.name}-nvidia-smi-q.txt; nvidia-smi --query-gpu=index,serial,uuid,"
                 "pci.bus_id --format=csv'"),
        why="RMA evidence: the bug report, `nvidia-smi -q` and each GPU's serial and UUID"
            + (f" ({facts.xid_text()})" if facts.xids else "") + "; attach them with this incident's evidence bundle "
            "(`triage-bot export <INC> --bundle`)"))
    return steps


def _kubernetes_steps(facts: _Facts) -> list[_Step]:
    name = shlex.quote(facts.name)
    if not facts.faulty:
        if facts.cordoned:
            return [_Step(command=f"kubectl uncordon {name}",
                          why="return to service: cordoned, yet no fault was seen (ask who cordoned it and why first)")]
        return []
    steps = []
    if not facts.cordoned:
        steps.append(_Step(command=f"kubectl cordon {name}", why="cordon: no new pods land on the node"))
    steps.append(_Step(
        command=f"kubectl drain {name} --ignore-daemonsets --delete-emptydir-data --timeout=15m",
        why=f"drain: evicts {facts.pods} pod(s) of {facts.workload_count} workload(s) now on it ({facts.named_workloads()})"
            + ("; the kubelet is not answering, so pods are only marked for deletion" if facts.not_ready else "")))
    if facts.not_ready:
        steps.append(_Step(command=f"ssh {name} 'systemctl status kubelet containerd; journalctl -u kubelet "
                                   "-u containerd --since -30min | tail -n 200'",
                           why="kubelet and container runtime: why the node stopped reporting Ready"))
    for pod in facts.failing_stack[:3]:
        namespace, _, pod_name = pod.partition("/")
        steps.append(_Step(command=f"kubectl logs -n {shlex.quote(namespace)} {shlex.quote(pod_name)} --all-containers "
                                   "--previous --tail=100",
                           why=f"GPU stack: {pod} is failing on this node; its previous log says why"))
    if facts.gpu_fault or facts.failing_stack:
        steps += _gpu_steps(facts, run_on=f"ssh {name}")
    steps.append(_Step(command=f"kubectl uncordon {name}",
                       why="return to service: only after the diagnostics pass and the cause is fixed"))
    return steps


def _slurm_steps(facts: _Facts) -> list[_Step]:
    name = shlex.quote(facts.name)
    if not facts.faulty:
        return []
    steps = []
    if not facts.drained:
        reason = f"triage: {facts.xid_text() or facts.reason_text or 'node fault'}"[:120]
        steps.append(_Step(command=f"scontrol update NodeName={name} State=DRAIN Reason={shlex.quote(reason)}",
                           why="drain: no new jobs start on the node; running jobs finish"))
    jobs = ", ".join(facts.workloads[:MAX_NAMED_WORKLOADS]) or "none"
    steps.append(_Step(command=f"squeue -w {name} -o '%i %u %T %j %M'",
                       why=f"running jobs: {facts.workload_count} on the node now ({jobs}); "
                           "they finish or are requeued before any reset"))
    if facts.gpu_fault:
        steps += _gpu_steps(facts, run_on=f"ssh {name}")
    steps.append(_Step(command=f"scontrol update NodeName={name} State=RESUME",
                       why="return to service: only after the diagnostics pass and the cause is fixed"))
    return steps
