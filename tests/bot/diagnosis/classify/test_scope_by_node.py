"""Fabric scope counts distinct nodes and links: a pod's hostname, its IP and its node are one place."""

from __future__ import annotations

from bot.diagnosis.classify import diagnose_observations
from bot.evidence import findings
from tests.bot.diagnosis.classify.observations import observation

LINE = "{host}:48213:48291 [2] NCCL WARN NET/IB : Got completion from peer {peer}<52431> with status=12 hca mlx5_2"


def _line(*, host: str, host_node: str | None, peer: str, peer_node: str | None, node: str) -> findings.Observation:
    fields = {"host": host, "peer": peer, "node": node, "pattern": "nccl_warn"}
    fields.update({key: value for key, value in (("host_node", host_node), ("peer_node", peer_node)) if value})
    return observation(kind="log_line", text=LINE.format(host=host, peer=peer), subject=f"pod/ml/{host}", **fields)


def test_two_pods_naming_each_other_by_hostname_and_pod_ip_are_one_path_between_two_nodes() -> None:
    diagnosis = diagnose_observations([
        _line(host="train-master-0", host_node="gpu-node-03", peer="10.244.30.3", peer_node="gpu-node-07",
              node="gpu-node-03"),
        _line(host="train-worker-0", host_node="gpu-node-07", peer="10.244.30.2", peer_node="gpu-node-03",
              node="gpu-node-07")])
    assert diagnosis.verdict.layer is findings.Layer.FABRIC
    assert diagnosis.verdict.scope is findings.Scope.PATH_LOCAL
    assert diagnosis.verdict.scope_nodes == ("gpu-node-03", "gpu-node-07")
    assert "[path gpu-node-03 <-> gpu-node-07]" in diagnosis.findings[0].summary


def test_unresolved_names_would_have_counted_four_places() -> None:
    diagnosis = diagnose_observations([
        _line(host="train-master-0", host_node=None, peer="10.244.30.3", peer_node=None, node="gpu-node-03"),
        _line(host="train-worker-0", host_node=None, peer="10.244.30.2", peer_node=None, node="gpu-node-07")])
    assert diagnosis.verdict.scope is findings.Scope.FABRIC_WIDE  # why the collector resolves names first


def test_one_node_on_every_failing_link_is_node_local() -> None:
    lines = [_line(host=f"train-{index}", host_node=f"gpu-node-0{index}", peer="10.244.30.9",
                   peer_node="gpu-node-09", node=f"gpu-node-0{index}") for index in (1, 2, 3)]
    diagnosis = diagnose_observations(lines)
    assert diagnosis.verdict.scope is findings.Scope.NODE_LOCAL
    assert diagnosis.verdict.scope_nodes == ("gpu-node-09",)


def test_disjoint_links_across_many_nodes_are_fabric_wide() -> None:
    pairs = [("gpu-node-01", "gpu-node-02"), ("gpu-node-03", "gpu-node-04"), ("gpu-node-05", "gpu-node-06")]
    lines = [_line(host=left, host_node=left, peer=right, peer_node=right, node=left) for left, right in pairs]
    diagnosis = diagnose_observations(lines)
    assert diagnosis.verdict.scope is findings.Scope.FABRIC_WIDE
    assert len(diagnosis.verdict.scope_nodes) == 6
