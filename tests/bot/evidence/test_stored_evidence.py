"""Evidence read back from a stored snapshot's JSON gives the same diff and fabric scope as the live report."""

from __future__ import annotations

import json
from pathlib import Path

from bot.diagnosis.compare import compare_observations, compare_snapshots
from bot.diagnosis.service import diagnose
from bot.evidence import stored as stored_evidence
from bot.evidence.findings import Observation, utcnow
from tests.support.kube_lab import running_lab


def _stored(report) -> dict:
    return json.loads(json.dumps(report.to_dict(include_observations=True)))  # as the database keeps it


def test_a_stored_snapshot_diffs_exactly_like_the_live_one(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="oom") as lab:
        failing = diagnose(target="ml/train-llm", settings=lab.settings())
        healthy = diagnose(target="ml/train-llm-ok", settings=lab.settings())
    from_storage = compare_observations(
        failing=stored_evidence.observations_of(_stored(failing)), healthy=healthy.observations
    )
    assert from_storage == compare_snapshots(failing=failing, healthy=healthy) and from_storage


def test_the_nccl_ib_snapshot_is_path_local_between_node_03_and_node_07(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="nccl-ib") as lab:
        report = diagnose(target="ml/train-llm", settings=lab.settings())
    evidence = stored_evidence.fabric_evidence(
        observations=stored_evidence.observations_of(_stored(report)), subject="ml/train-llm"
    )
    assert evidence.scope is not None
    assert (evidence.scope["scope"], evidence.scope["pair"]) == ("path-local", ["gpu-node-03", "gpu-node-07"])
    assert evidence.scope["suspect_hca"] == "mlx5_2"


def test_a_line_seen_in_both_a_log_line_and_the_log_tail_counts_once() -> None:
    line = ("gpu-node-03:1:2 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            "10.0.1.17<52431> (gpu-node-07) with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_2")
    common = {"source": "kubernetes", "subject": "pod/ml/a", "command": "kubectl logs", "observed_at": utcnow()}
    observations = [
        Observation(kind="log_line", text=line, fields={"line": line, "host": "gpu-node-03"}, **common),
        Observation(kind="log_tail", text=f"INFO start\n{line}\n", fields={"node": "gpu-node-03"}, **common),
    ]
    assert stored_evidence.host_logs(observations) == {"gpu-node-03": f"{line}\nINFO start\n"}
    events = stored_evidence.fabric_evidence(observations=observations, subject="ml/a").events
    assert len(events) == 1
