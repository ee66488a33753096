"""Durable scheduled jobs on PostgreSQL: how fast one and two replicas drain a backlog, and that each
job ran exactly once.

Prints jobs/s for one replica and for two (each with its own engine, claiming with conditional
UPDATEs and FOR UPDATE SKIP LOCKED), the ratio two/one, and duplicate executions (must be 0).
Run: TRIAGE_TEST_POSTGRES_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \
     PYTHONPATH=. python3 bench/bench_scheduled_tasks.py [jobs]
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from datetime import timedelta

import sqlalchemy
from sqlmodel import SQLModel

import storage.tables  # noqa: F401  (registers every table)
from bot.schedule.store import TaskContext, TaskRunner, TaskStore
from tests.support.postgres import fresh_postgres_database


def _drain(*, url: str, replicas: int, jobs: int) -> tuple[float, int]:
    """Seconds to run `jobs` due jobs with `replicas` runners polling in threads, and duplicate runs."""
    engines = [sqlalchemy.create_engine(url) for _ in range(replicas)]
    SQLModel.metadata.drop_all(engines[0])
    SQLModel.metadata.create_all(engines[0])
    seed = TaskStore(engine=engines[0])
    for index in range(jobs):
        seed.enqueue(kind="count", payload={"index": index}, due_at=seed.clock() - timedelta(seconds=1))
    runs: Counter[int] = Counter()
    lock = threading.Lock()

    def handler(context: TaskContext) -> None:
        with lock:
            runs[context.job.id] += 1

    def replica(engine: sqlalchemy.Engine, name: str) -> None:
        runner = TaskRunner(store=TaskStore(engine=engine), handlers={"count": handler}, instance_id=name, batch=20)
        while runner.run_due().ran:
            pass

    started = time.perf_counter()
    threads = [
        threading.Thread(target=replica, args=(engine, f"replica-{n}")) for n, engine in enumerate(engines)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for engine in engines:
        engine.dispose()
    missing = jobs - len(runs)
    if missing:
        raise SystemExit(f"{missing} jobs never ran")
    return elapsed, sum(count - 1 for count in runs.values())


def main() -> None:
    """Print the figures."""
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with fresh_postgres_database(prefix="triage_bench") as url:
        one, dup_one = _drain(url=url, replicas=1, jobs=jobs)
        two, dup_two = _drain(url=url, replicas=2, jobs=jobs)
    print(f"jobs: {jobs}")
    print(f"1 replica : {jobs / one:8.0f} jobs/s ({one:.2f} s), duplicate runs {dup_one}")
    print(f"2 replicas: {jobs / two:8.0f} jobs/s ({two:.2f} s), duplicate runs {dup_two}")
    print(f"ratio two/one: {one / two:.2f}x")


if __name__ == "__main__":
    main()
