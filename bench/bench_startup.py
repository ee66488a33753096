"""Start-up benchmark: what a command costs before (and beyond) its own work, measured as whole processes.

Prints, for the installed `triage-bot` entry point (the console script beside this Python, else
`python -c "from handlers.main import main; main()"`):
- `triage-bot --help`: median wall time of N runs (target: at most 0.3 s);
- `triage-bot triage job <lab workload> --format json`: median of (wall time - the snapshot's own elapsed_ms),
  i.e. what start-up, imports, rendering and exit add (target: at most 0.4 s);
- `triage-bot classify` on one line (target: under 0.5 s);
with the figures each run produced and the ratio to its target, all measured in this one run.

Run: PYTHONPATH=. python3 bench/bench_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELP_TARGET_S = 0.3
TRIAGE_OVERHEAD_TARGET_S = 0.4
CLASSIFY_TARGET_S = 0.5


def entry_point() -> list[str]:
    """The console script pip installed beside this interpreter, or the module entry."""
    script = Path(sys.executable).with_name("triage-bot")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from handlers.main import main; main()"]


def timed(argv: list[str], *, stdin: str | None = None) -> tuple[float, str]:
    """Wall seconds of one whole process, and its stdout."""
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-6:])} exited {done.returncode}: {done.stderr[-500:]}")
    return wall, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bot.lab import kube_api, scenarios

    command = entry_point()
    print(f"entry point: {' '.join(command)[:100]}")
    timed([*command, "--help"])  # warm the page cache and .pyc files once
    helps = [timed([*command, "--help"])[0] for _ in range(args.runs)]

    built = scenarios.build("oom")
    server = kube_api.KubeApiServer(state=built.state).start()
    try:
        kubeconfig = server.write_kubeconfig(path=Path(tempfile.mkdtemp(prefix="bench-startup-")) / "kubeconfig")
        triage = [*command, "triage", "job", built.target, "--kubeconfig", str(kubeconfig), "--format", "json"]
        timed(triage)
        overheads, walls, elapsed = [], [], []
        for _ in range(args.runs):
            wall, out = timed(triage)
            snapshot_s = json.loads(out)["elapsed_ms"] / 1000
            walls.append(wall)
            elapsed.append(snapshot_s)
            overheads.append(wall - snapshot_s)
    finally:
        server.stop()
    classify = [timed([*command, "classify"], stdin="0/8 nodes are available: 8 Insufficient nvidia.com/gpu\n")[0]
                for _ in range(args.runs)]

    def row(name: str, values: list[float], target: float) -> None:
        median = statistics.median(values)
        shown = ", ".join(f"{value:.3f}" for value in values)
        print(f"{name:<44} median {median:.3f} s  target {target:.1f} s  ratio {median / target:.2f}  runs [{shown}]")

    row("triage-bot --help", helps, HELP_TARGET_S)
    row("triage job: wall - snapshot's own elapsed", overheads, TRIAGE_OVERHEAD_TARGET_S)
    print(f"{'  (whole command wall)':<44} median {statistics.median(walls):.3f} s; "
          f"snapshot's own elapsed median {statistics.median(elapsed):.3f} s")
    row("triage-bot classify (one line)", classify, CLASSIFY_TARGET_S)


if __name__ == "__main__":
    main()
