"""Benchmarks: parse throughput of the Slurm, GPU and fabric parsers on recorded outputs (prints figures).

Run: PYTHONPATH=$PWD python3 bench/bench_slurm_gpu_fabric.py
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from bot.diagnosis.collectors.fabric import nccl as fabric
from bot.diagnosis.collectors.gpu import nvidia_smi as gpu
from bot.diagnosis.collectors.slurm import cli as slurm_cli
from bot.evidence.findings import utcnow

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def _measure(name: str, work: Callable[[], object], *, items: int, repeat: int = 3) -> None:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    tracemalloc.start()
    work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"{name:48} {items:>8} items  {best * 1000:9.1f} ms  {items / best:>12,.0f} items/s  "
        f"peak {peak / 1e6:6.1f} MB"
    )


def main() -> None:
    """Print one line per parser."""
    job_line = (FIXTURES / "slurm" / "scontrol_job_pending_reqnodenotavail.txt").read_text().strip()
    _measure(
        "scontrol job lines -> SlurmJob",
        lambda: [slurm_cli.job_from_scontrol(job_line) for _ in range(10_000)],
        items=10_000,
    )
    xml = (FIXTURES / "gpu" / "h200" / "nvidia-smi-q-x.xml").read_text()
    _measure(
        "nvidia-smi -q -x documents (1 GPU each)",
        lambda: [gpu.parse_nvidia_smi_xml(xml) for _ in range(500)],
        items=500,
    )
    noise = "gpu-node-03:48213:48290 [2] NCCL INFO Channel 02/0 : 3[2] -> 11[2] [send] via NET/IB/2"
    lab = (FIXTURES / "fabric" / "lab-nccl-ib" / "gpu-node-03.log").read_text()
    big = "\n".join([noise] * 200_000) + "\n" + lab
    lines = big.count("\n") + 1
    _measure(
        "NCCL log lines scanned (200k INFO + lab errors)",
        lambda: fabric.fabric_observations(logs={"gpu-node-03": big}, observed_at=utcnow()),
        items=lines,
        repeat=1,
    )
    ratio_base = len(lab.splitlines())
    print(
        f"fabric scan cost ratio, 200k-line log vs the {ratio_base}-line lab log: "
        f"{lines / ratio_base:,.0f}x lines"
    )


if __name__ == "__main__":
    main()
