"""Redaction throughput: how long scrubbing a full snapshot's evidence takes (it runs on every one).

PYTHONPATH=$PWD python3 bench/bench_redact.py
"""

from __future__ import annotations

import time

from bot.evidence import redact

LOG_LINE = (
    "2026-11-29T22:00:01Z rank 3 step 1200 | loss 2.314 | max_tokens=4096 | tokens/s: 18234.5 "
    "NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC nvcr.io/nvidia/pytorch:24.05-py3\n"
)
LEAKY_LINE = "env HF_TOKEN=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 Authorization: Bearer a7F3kQ9zL2mX8vB4nC6p\n"


def _measure(label: str, text: str, *, rounds: int) -> None:
    started = time.perf_counter()
    for _ in range(rounds):
        redact.redact_text(text)
    elapsed = time.perf_counter() - started
    megabytes = len(text.encode()) * rounds / 1e6
    print(
        f"{label:<34} {len(text) / 1024:8.1f} KiB  {elapsed / rounds * 1000:8.2f} ms each  {megabytes / elapsed:7.1f} MB/s"
    )


def main() -> None:
    """Typical evidence (256 KiB, the default snapshot cap), leaky evidence, and hostile shapes."""
    cap = 262_144
    _measure("clean logs at the evidence cap", (LOG_LINE * (cap // len(LOG_LINE)))[:cap], rounds=10)
    _measure("1 leaky line in 20 at the cap", ((LOG_LINE * 19 + LEAKY_LINE) * 200)[:cap], rounds=10)
    _measure("hostile: 'a:' repeated", "a:" * (cap // 2), rounds=5)
    _measure("hostile: 'password=' repeated", "password=" * (cap // 9), rounds=5)
    _measure("hostile: unterminated PEM", "-----BEGIN PRIVATE KEY-----" + "A" * cap, rounds=5)
    _measure("hostile: 'mysql ' repeated", ("mysql " * (cap // 6))[:cap], rounds=5)
    _measure("hostile: 'curl -u a:' repeated", ("curl -u a:" * (cap // 10))[:cap], rounds=5)
    _measure("hostile: 'machine x password' rep.", ("machine x password " * (cap // 19))[:cap], rounds=5)
    _measure("hostile: 'eyJ' repeated", ("eyJ" * (cap // 3))[:cap], rounds=5)
    _measure("hostile: one 256 KiB word", "a" * cap, rounds=5)


if __name__ == "__main__":
    main()
