"""Benchmark: `/triage node` snapshots: API requests, bytes read and wall time, per lab node scenario and on a
big cluster (the pods of one node are found by a server-side field selector, never by listing the cluster).

For each node scenario (Xid 79, failing driver pod, NotReady, healthy) it runs the real node snapshot against
the lab API server (warm process, median of --runs) and prints requests, response bytes, elapsed and the
verdict; then the Xid node again inside a cluster with --filler-nodes / --filler-pods more objects; then, if
Slurm's tools answer, a Slurm node through the CLI backend.

Run: PYTHONPATH=$PWD python3 bench/bench_node_snapshot.py [--runs 5 --filler-nodes 2000 --filler-pods 20000]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config import Settings
from bot.diagnosis.service import diagnose
from bot.lab import node_scenarios
from bot.lab.kube_api import KubeApiServer


def _filler() -> object:
    spec = importlib.util.spec_from_file_location("bench_snapshot", ROOT / "bench" / "bench_snapshot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.add_filler


def _measure(name: str, *, runs: int, filler: tuple[int, int] | None = None) -> None:
    scenario = node_scenarios.NODE_SCENARIOS[name]()
    if filler:
        _filler()(scenario.state, nodes=filler[0], pods=filler[1], events=filler[1])
    folder = Path(tempfile.mkdtemp(prefix=f"bench-node-{name}-"))
    with KubeApiServer(state=scenario.state) as server:
        settings = Settings(KUBECONFIG=str(server.write_kubeconfig(path=folder / "kubeconfig")))
        diagnose(target=scenario.target, settings=settings)  # warm: client models, classifier rules
        times, requests, sent = [], [], []
        report = None
        for _ in range(runs):
            server.reset_log()
            started = time.perf_counter()
            report = diagnose(target=scenario.target, settings=settings)
            times.append(time.perf_counter() - started)
            requests.append(len(server.requests))
            sent.append(server.bytes_sent())
    assert report is not None
    layer = report.verdict.layer.value if report.verdict.layer else "none"
    label = name + (f" (+{filler[0]} nodes, {filler[1]} pods)" if filler else "")
    print(f"{label:44} requests {statistics.median(requests):>3.0f}  read {statistics.median(sent) / 1024:8.1f} KiB  "
          f"elapsed {statistics.median(times) * 1000:6.1f} ms  verdict {layer} ({report.verdict.confidence:.2f})  "
          f"findings {len(report.findings)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--filler-nodes", type=int, default=2000)
    parser.add_argument("--filler-pods", type=int, default=20000)
    args = parser.parse_args()
    for name in node_scenarios.NODE_SCENARIOS:
        _measure(name, runs=args.runs)
    _measure("node-xid", runs=args.runs, filler=(args.filler_nodes, args.filler_pods))
    if shutil.which("sinfo"):
        settings = Settings(TRIAGE_SLURM_BACKEND="cli")
        diagnose(target="slurm-node:gpu-absent-1", settings=settings)
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            report = diagnose(target="slurm-node:gpu-absent-1", settings=settings)
            times.append(time.perf_counter() - started)
        layer = report.verdict.layer.value if report.verdict.layer else "none"
        print(f"{'slurm-node:gpu-absent-1 (CLI: 3 commands)':44} elapsed {statistics.median(times) * 1000:6.1f} ms  "
              f"verdict {layer} ({report.verdict.confidence:.2f})  findings {len(report.findings)}")


if __name__ == "__main__":
    main()
