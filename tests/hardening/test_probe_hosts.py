"""`/triage fabric … probe` reaches only nodes the scheduler placed the workload on: a log line can name any
host (the workload writes its logs), so a host named only by the logs is never probed."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings
from bot.diagnosis.collectors import node_probe
from bot.evidence import stored as stored_evidence
from bot.evidence.findings import Observation, utcnow
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from bot.lab.demo import minimal_diagnoser
from tests.hardening.conftest import FaultySlackApi, running_bot
from tests.support.paths import FIXTURES
from tests.support.slack import BotUnderTest, shown

IBSTAT = next(FIXTURES.rglob("ibstat-*.txt"))


def _nccl_line(*, host: str, peer: str) -> str:
    return (
        f"{host}:48213:48291 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        f"10.0.0.9<52431> ({peer}) with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_2"
    )


def _pod(name: str, node: str) -> Observation:
    return Observation(source="kubernetes", kind="pod_phase", subject=f"pod/ml/{name}", text=f"{name} Running",
                       command="kubectl get pod", observed_at=utcnow(), fields={"phase": "Running", "node": node})


def _log(*, pod_node: str, host: str, peer: str) -> Observation:
    line = _nccl_line(host=host, peer=peer)
    return Observation(source="kubernetes", kind="log_line", subject="pod/ml/train-0", text=line,
                       command="kubectl logs", observed_at=utcnow(),
                       fields={"node": pod_node, "host": host, "peer": peer, "line": line, "pattern": "nccl_warn"})


def lying_logs_diagnoser(*, target: Target, settings: Settings) -> SnapshotReport:
    """The workload ran on gpu-node-03 only; its logs claim a broken path to the bastion host."""
    report = minimal_diagnoser(target=target, settings=settings)
    observations = (
        _pod("train-0", "gpu-node-03"),
        _log(pod_node="gpu-node-03", host="gpu-node-03", peer="bastion-01"),
        _log(pod_node="gpu-node-03", host="bastion-01", peer="gpu-node-03"),
    )
    return dataclasses.replace(report, observations=observations)


@pytest.fixture
def probing_bot(
    slack_stand_in: FaultySlackApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[BotUnderTest, Path]]:
    bin_dir, calls = tmp_path / "bin", tmp_path / "srun-calls"
    bin_dir.mkdir()
    srun = bin_dir / "srun"  # a stand-in for Slurm's srun: records its argv, answers with a published ibstat
    srun.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncat {IBSTAT}\n')
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with running_bot(
        database_url=f"sqlite:///{tmp_path / 'probe.db'}",
        slack=slack_stand_in,
        diagnoser=lying_logs_diagnoser,
        node_probe_runner="srun",
    ) as bot:
        yield bot, calls


def test_a_host_named_only_by_the_logs_is_never_probed(probing_bot: tuple[BotUnderTest, Path]) -> None:
    bot, calls = probing_bot
    bot.command("job ml/train-7")
    bot.slack.clear()
    bot.command("fabric INC-0001 probe")
    ran = calls.read_text().splitlines()
    assert [line.split()[:2] for line in ran] == [["-w", "gpu-node-03"]]
    last = shown(str(bot.slack.calls_to("chat.postMessage")[-1].params["text"]))
    assert "`bastion-01`: not probed (not a node this workload ran on" in last
    (probe,) = [item for item in bot.services.incidents.timeline("INC-0001") if item.kind == "fabric_probe"]
    assert probe.data["nodes"] == ["gpu-node-03"]


def test_the_probe_plan_keeps_only_scheduled_nodes_and_maps_pod_names_to_their_node() -> None:
    observations = [_pod("train-0", "gpu-node-03"), _pod("train-1", "gpu-node-07")]
    plan = stored_evidence.probe_plan(
        observations=observations, scope={"pair": ["train-1", "login-01"]}, limit=2
    )
    assert (plan.nodes, plan.refused, plan.ran_on) == (("gpu-node-07",), ("login-01",), ("gpu-node-03", "gpu-node-07"))


def test_slurm_jobs_are_probed_only_on_their_allocated_nodes() -> None:
    job = Observation(source="slurm", kind="slurm_job", subject="slurm:88123", text="Job 88123 RUNNING",
                      command="scontrol show job 88123", observed_at=utcnow(),
                      fields={"nodes": ["gpu-a01", "gpu-a02"], "req_nodes": ["head-01"]})
    plan = stored_evidence.probe_plan(
        observations=[job], scope={"hosts": ["gpu-a02", "head-01", "gpu-a01"]}, limit=2
    )
    assert plan.nodes == ("gpu-a02", "gpu-a01") and plan.refused == ("head-01",)


def test_a_log_line_cannot_pass_for_the_schedulers_record() -> None:
    forged = Observation(source="kubernetes", kind="log_line", subject="pod/ml/x", text="x", command="kubectl logs",
                         observed_at=utcnow(), fields={"node": "login-01", "host": "login-01"})
    plan = stored_evidence.probe_plan(observations=[forged], scope={"suspect_host": "login-01"}, limit=2)
    assert plan.nodes == () and plan.refused == ("login-01",)


def test_the_debug_pod_runner_uses_the_configured_kubeconfig_and_context(tmp_path: Path) -> None:
    settings = Settings(
        TRIAGE_NODE_PROBE_RUNNER="k8s-debug", TRIAGE_NODE_PROBE_IMAGE="probe:1", KUBECONFIG=str(tmp_path / "kc"),
        TRIAGE_KUBE_CONTEXT="gpu-prod", TRIAGE_NODE_PROBE_NAMESPACE="triage",
    )
    runner = node_probe.runner_for(settings=settings)
    assert runner is not None
    argv = runner.argv(node="gpu-node-03", command=["ibstat"], time_cap_seconds=30)
    assert argv[:3] == ["kubectl", f"--kubeconfig={tmp_path / 'kc'}", "--context=gpu-prod"]
    assert argv[argv.index("-n") + 1] == "triage"
    in_cluster = node_probe.runner_for(settings=settings.model_copy(update={"in_cluster": True}))
    assert in_cluster is not None
    assert not any(item.startswith(("--kubeconfig", "--context")) for item in in_cluster.argv(
        node="gpu-node-03", command=["ibstat"], time_cap_seconds=30))
