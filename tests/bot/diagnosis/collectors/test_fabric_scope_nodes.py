"""The fabric scope decision counts nodes: hostnames and pod IPs in NCCL logs are resolved before counting."""

from __future__ import annotations

from pathlib import Path

from bot.diagnosis.collectors.fabric import nccl
from bot.diagnosis.service import diagnose
from bot.evidence import stored
from bot.evidence.findings import utcnow
from tests.support.kube_lab import running_lab

MASTER = ("train-master-0:48213:48291 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
          "10.244.30.3<52431> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_2\n")
WORKER = ("train-worker-0:48213:48291 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
          "10.244.30.2<52431> with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_2\n")
PODS = {"train-master-0": "gpu-node-03", "train-worker-0": "gpu-node-07", "10.244.30.2": "gpu-node-03",
        "10.244.30.3": "gpu-node-07"}


def _scope(found: list) -> dict:
    return next(item.fields for item in found if item.kind == "fabric_scope")


def test_pod_hostnames_and_pod_ips_resolved_to_nodes_make_one_path_between_two_nodes() -> None:
    found = nccl.fabric_observations(logs={"train-master-0": MASTER, "train-worker-0": WORKER},
                                     observed_at=utcnow(), host_nodes=PODS)
    scope = _scope(found)
    assert scope["scope"] == "path-local"
    assert scope["pair"] == ["gpu-node-03", "gpu-node-07"]
    assert {item.fields["node"] for item in found if item.kind == "nccl_error"} == {"gpu-node-03", "gpu-node-07"}


def test_the_stored_snapshot_of_the_lab_path_resolves_the_same_pair(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="nccl-path-hostnames") as lab:
        report = diagnose(target="pytorchjob/ml/train-llm", settings=lab.settings())
    evidence = stored.fabric_evidence(observations=report.observations, subject="pytorchjob/ml/train-llm")
    assert evidence.scope is not None
    assert evidence.scope["scope"] == "path-local"
    assert evidence.scope["pair"] == ["gpu-node-03", "gpu-node-07"]
    assert report.verdict.scope_nodes == ("gpu-node-03", "gpu-node-07")
