"""Benchmark: one targeted snapshot vs the seed runbook's cluster sweep, on a 5,000-node lab cluster.

Builds 5,000 nodes, 50,000 pods and 200,000 events around the nccl-ib incident, serves them on loopback, then
measures (1) the snapshot's own time inside a warm process, (2) the whole `triage-bot triage job` command, and
(3) the sweep `kubectl get events -A --sort-by=.lastTimestamp`, `kubectl get pods -A -o wide`,
`kubectl get nodes -o wide` against the same server: wall time, API requests, bytes read, peak RSS.

Then (4) the request count and own time of one snapshot per workload kind, on the lab scenarios (a batch Job
first: its request count must stay within 2x of what it was before every kind was resolved).

Run: PYTHONPATH=$PWD python3 bench/bench_snapshot.py [--nodes N --pods N --events N] [--kinds-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.lab import objects as o
from bot.lab import scenarios
from bot.lab.kube_api import ClusterState, KubeApiServer

TARGET = "ml/train-llm"
TARGETS = {"snapshot": 1.0, "ratio": 20.0, "rss_mb": 150.0}
# (scenario, target): one per kind; the batch Job's count before issue 13 is the budget's baseline.
KIND_TARGETS = (("crashloop", "ml/train-llm"), ("nccl-ib", "ml/train-llm"), ("gpu-xid", "ml/train-llm"),
                ("aiperf-crashloop", "aiperfjob/perf/bench-llm"), ("vllm-crashloop", "deployment/serving/vllm-llama"),
                ("statefulset-nfs", "statefulset/serving/triton-ensemble"), ("cronjob-latest", "cronjob/ml/nightly-eval"),
                ("rayjob-pending", "rayjob/ml/rl-tune"), ("inferenceservice-oom", "inferenceservice/serving/llama-isvc"),
                ("bare-pod", "pod/ml/gpu-smoke"), ("unknown-crd", "modelservers.serving.example.com/serving/llama-srv"),
                ("pending-node-no-driver", "ml/train-llm"), ("vllm-crashloop", "serving/vllm-llama"))
JOB_REQUESTS_BEFORE = 11  # the crash-looping batch Job of `crashloop`, measured before issue 13


def add_filler(state: ClusterState, *, nodes: int, pods: int, events: int) -> None:
    """A big busy cluster, built compactly: pods and events share their unchanging sub-objects."""
    for index in range(nodes):
        state.add(o.node(name=f"fill-node-{index:05d}", ip=f"10.{100 + index // 65025}.{index // 255 % 255}.{index % 255}",
                         gpus=8 if index % 5 else 0))
    spec = o.container(name="app", image="registry.local/batch/worker:1.4.2", gpus=1, memory="16Gi", cpu="4")
    template = o.pod(namespace="team-000", name="template", node_name="fill-node-00000", containers=[spec],
                     labels={"app": "worker"})
    namespaces = max(1, pods // 500)
    for ns_index in range(namespaces):
        state.add(o.namespace(f"team-{ns_index:03d}"))
    per_pod = max(1, events // max(1, pods))
    reasons = [("Scheduled", "Successfully assigned pod to node"), ("Pulled", "Container image already present"),
               ("Created", "Created container app"), ("Started", "Started container app")]
    source = {"component": "kubelet"}
    for index in range(pods):
        namespace, name = f"team-{index % namespaces:03d}", f"worker-{index:06d}"
        node_name = f"fill-node-{index % nodes:05d}"
        pod_uid = f"00000000-0000-4000-8000-{index:012d}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "uid": pod_uid,
                            "creationTimestamp": template["metadata"]["creationTimestamp"],
                            "labels": template["metadata"]["labels"]},
               "spec": {**template["spec"], "nodeName": node_name},
               "status": {**template["status"], "podIP": f"10.{200 + index // 65025}.{index // 255 % 255}.{index % 255}"}}
        state.add(pod)
        involved = {"kind": "Pod", "name": name, "namespace": namespace, "uid": pod_uid, "apiVersion": "v1"}
        for serial in range(per_pod):
            reason, message = reasons[serial % len(reasons)]
            stamp = o.ts(3600 - (index % 3000) - serial)
            state.add({"apiVersion": "v1", "kind": "Event",
                       "metadata": {"name": f"{name}.{serial:04x}", "namespace": namespace,
                                    "uid": f"00000000-0000-4000-9000-{index * 8 + serial:012d}",
                                    "creationTimestamp": stamp},
                       "involvedObject": involved, "reason": reason, "message": message, "type": "Normal",
                       "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp, "source": source})


def _peak_rss_mb(pid: int) -> float | None:
    """VmHWM of a live process: its own peak RSS (unlike ru_maxrss, it resets at exec)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _measure(argv: list[str], *, env: dict[str, str], server: KubeApiServer) -> dict[str, Any]:
    """Run one command; wall time, its peak RSS (VmHWM, polled), and the API requests and bytes it caused."""
    server.reset_log()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT)
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, _peak_rss_mb(process.pid) or 0.0)
            time.sleep(0.01)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if process.returncode != 0:
        raise SystemExit(f"{argv} failed ({process.returncode}): {stderr.decode()[-2000:]}")
    return {"wall_s": wall, "requests": len(server.requests), "bytes": server.bytes_sent(),
            "rss_mb": peak, "stdout": stdout.decode(errors="replace")}


def _snapshot_child(kubeconfig: str) -> None:
    """In a fresh process: time diagnose() alone (process start excluded)."""

    from bot.config import load_settings
    from bot.diagnosis.service import diagnose

    settings = load_settings(KUBECONFIG=kubeconfig)
    started = time.perf_counter()
    report = diagnose(target=TARGET, settings=settings)
    elapsed = time.perf_counter() - started
    print(json.dumps({"snapshot_s": elapsed, "observations": len(report.observations),
                      "collectors": {c.name: c.outcome.value for c in report.collectors},
                      "rss_mb": _peak_rss_mb(os.getpid())}))


def _kinds_child() -> None:
    """In a fresh, warm process: one snapshot per kind on its lab scenario; requests and own time as JSON lines."""
    from bot.config import load_settings
    from bot.diagnosis.service import diagnose

    for scenario, target in KIND_TARGETS:
        with KubeApiServer(state=scenarios.build(scenario).state) as server:
            folder = Path(tempfile.mkdtemp(prefix="bench-kinds-"))
            settings = load_settings(KUBECONFIG=str(server.write_kubeconfig(path=folder / "kubeconfig")))
            started = time.perf_counter()
            report = diagnose(target=target, settings=settings)
            elapsed = time.perf_counter() - started
            print(json.dumps({"scenario": scenario, "target": target, "kind": report.target_kind,
                              "requests": len(server.requests), "snapshot_s": elapsed,
                              "layer": report.verdict.layer.value if report.verdict.layer else None,
                              "confidence": report.verdict.confidence, "hops": len(report.followed)}))


def _print_kinds(env: dict[str, str]) -> None:
    result = subprocess.run([sys.executable, __file__, "--kinds-child"], env=env, cwd=ROOT, capture_output=True,
                            text=True, check=True)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    print(f"{'target (lab scenario)':58}{'kind':>34}{'requests':>10}{'own s':>8}{'hops':>6}  verdict")
    for row in rows:
        print(f"{row['target'] + ' (' + row['scenario'] + ')':58}{row['kind']:>34}{row['requests']:>10}"
              f"{row['snapshot_s']:>8.3f}{row['hops']:>6}  {row['layer']} {row['confidence']:.2f}")
    job = next(row for row in rows if row["scenario"] == "crashloop")
    print(f"batch Job: {job['requests']} requests (before: {JOB_REQUESTS_BEFORE}; within 2x: "
          f"{'met' if job['requests'] <= 2 * JOB_REQUESTS_BEFORE else 'MISSED'})")


def main() -> None:
    """Build, serve, measure, print figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--kinds-only", action="store_true", help="only the per-kind request counts")
    parser.add_argument("--snapshot-child", help=argparse.SUPPRESS)
    parser.add_argument("--kinds-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.snapshot_child:
        _snapshot_child(args.snapshot_child)
        return
    if args.kinds_child:
        _kinds_child()
        return
    if args.kinds_only:
        _print_kinds({**os.environ, "PYTHONPATH": str(ROOT)})
        return
    started = time.perf_counter()
    state = scenarios.build("nccl-ib").state
    add_filler(state, nodes=args.nodes, pods=args.pods, events=args.events)
    built = time.perf_counter() - started
    counts = {kind: state.count(group="", plural=kind) for kind in ("nodes", "pods", "events")}
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"cluster: {counts['nodes']:,} nodes, {counts['pods']:,} pods, {counts['events']:,} events "
          f"(built in {built:.1f}s)")
    workdir = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(workdir)}
    env.pop("KUBECONFIG", None)
    with KubeApiServer(state=state) as server:
        kubeconfig = str(server.write_kubeconfig(path=workdir / "kubeconfig"))
        inner = _measure([sys.executable, __file__, "--snapshot-child", kubeconfig], env=env, server=server)
        child = json.loads(inner["stdout"].strip().splitlines()[-1])
        runs = [_measure([sys.executable, "-c", "from handlers.main import main; main()", "triage", "job", TARGET,
                          "--kubeconfig", kubeconfig, "--format", "json"], env=env, server=server)
                for _ in range(3)]
        command = sorted(runs, key=lambda run: run["wall_s"])[1]  # the median of three
        sweep: dict[str, dict[str, Any]] = {}
        kubectl = shutil.which("kubectl")
        if kubectl:
            for name, extra in (("events", ["get", "events", "-A", "--sort-by=.lastTimestamp"]),
                                ("pods", ["get", "pods", "-A", "-o", "wide"]),
                                ("nodes", ["get", "nodes", "-o", "wide"])):
                sweep[name] = _measure([kubectl, "--kubeconfig", kubeconfig, "--cache-dir", str(workdir / "cache"),
                                        *extra], env=env, server=server)
    print(f"snapshot collectors: {child['collectors']}")
    print(f"{'':34}{'wall s':>10}{'requests':>10}{'MB read':>10}{'peak RSS MB':>13}")
    print(f"{'snapshot (own time, warm process)':34}{child['snapshot_s']:>10.3f}{inner['requests']:>10}"
          f"{inner['bytes'] / 1e6:>10.2f}{child['rss_mb']:>13.1f}")
    print(f"{'triage-bot triage job (median of 3)':34}{command['wall_s']:>10.3f}{command['requests']:>10}"
          f"{command['bytes'] / 1e6:>10.2f}{command['rss_mb']:>13.1f}")
    for name, figures in sweep.items():
        print(f"{'kubectl sweep: ' + name:34}{figures['wall_s']:>10.3f}{figures['requests']:>10}"
              f"{figures['bytes'] / 1e6:>10.2f}{figures['rss_mb']:>13.1f}")
    if sweep:
        total = {key: sum(item[key] for item in sweep.values()) for key in ("wall_s", "requests", "bytes")}
        print(f"{'kubectl sweep: total':34}{total['wall_s']:>10.3f}{total['requests']:>10}"
              f"{total['bytes'] / 1e6:>10.2f}")
        ratio = total["wall_s"] / command["wall_s"]
        print(f"ratios: sweep/whole-command wall {ratio:.1f}x (target >= {TARGETS['ratio']:.0f}x), "
              f"bytes {total['bytes'] / max(1, command['bytes']):.0f}x, "
              f"requests {total['requests'] / max(1, command['requests']):.1f}x")
    print(f"targets: snapshot {child['snapshot_s']:.3f}s (< {TARGETS['snapshot']}s: "
          f"{'met' if child['snapshot_s'] < TARGETS['snapshot'] else 'MISSED'}), "
          f"peak RSS {command['rss_mb']:.0f} MB whole command (< {TARGETS['rss_mb']:.0f} MB: "
          f"{'met' if command['rss_mb'] < TARGETS['rss_mb'] else 'MISSED'})")
    _print_kinds(env)


if __name__ == "__main__":
    main()
