"""The database going away: a clear "try again", nothing half-written, recovery without a restart;
and a process killed mid-snapshot leaves the snapshot marked interrupted after the restart."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy
from sqlalchemy.engine import make_url

from bot.evidence.targets import parse_target
from bot.incidents.service import SNAPSHOT_INTERRUPTED, IncidentService
from storage import db
from tests.hardening.conftest import FaultySlackApi, running_bot
from tests.hardening.tcp_proxy import TcpProxy
from tests.support.paths import ROOT
from tests.support.postgres import fresh_postgres_database
from tests.support.serve_process import start_serve


def _count(engine: sqlalchemy.Engine, table: str) -> int:
    with engine.connect() as connection:
        return connection.execute(sqlalchemy.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()


def _ephemeral_texts(slack: FaultySlackApi) -> list[str]:
    return [str(call.params.get("text", "")) for call in slack.calls_to("chat.postEphemeral")]


def _assert_every_incident_is_whole(engine: sqlalchemy.Engine) -> None:
    """No half-written incident: each has its "opened" entry and a commander."""
    with engine.connect() as connection:
        orphans = connection.execute(
            sqlalchemy.text(
                "SELECT i.key FROM incident i WHERE NOT EXISTS (SELECT 1 FROM timeline_entry t "
                "WHERE t.incident_id = i.id AND t.kind = 'opened') OR NOT EXISTS (SELECT 1 FROM "
                "role_assignment r WHERE r.incident_id = i.id AND r.role = 'commander' AND r.active)"
            )
        ).all()
    assert orphans == []


@pytest.fixture
def proxied_postgres() -> Iterator[tuple[str, str, TcpProxy]]:
    """(direct URL, URL through a cuttable proxy, the proxy) for a throwaway PostgreSQL database."""
    with fresh_postgres_database(prefix="triage_dbfault") as url:
        parsed = make_url(url)
        proxy = TcpProxy(upstream_host=parsed.host or "127.0.0.1", upstream_port=parsed.port or 5432)
        try:
            yield (
                url,
                parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False),
                proxy,
            )
        finally:
            proxy.close()


@pytest.mark.postgres
def test_a_database_outage_gets_try_again_and_the_bot_recovers_without_a_restart(
    slack_stand_in: FaultySlackApi, proxied_postgres: tuple[str, str, TcpProxy]
) -> None:
    direct_url, proxied_url, proxy = proxied_postgres
    with running_bot(database_url=proxied_url, slack=slack_stand_in) as bot:
        bot.command("job ml/before")
        slack_stand_in.clear()

        proxy.cut()
        during = bot.command("job ml/during")
        assert during.status_code == 200  # the ack never waits for the database
        bot.command("note INC-0001 drained gpu-07")
        told = _ephemeral_texts(slack_stand_in)
        assert len(told) == 2
        assert all("unavailable" in text and "try again" in text for text in told)
        assert all("Traceback" not in text and "psycopg" not in text for text in told)
        not_ready = requests.get(f"{bot.server.url}/readyz", timeout=10)
        assert not_ready.status_code == 503 and not_ready.json()["checks"]["database"] != "ok"

        proxy.restore()
        assert requests.get(f"{bot.server.url}/readyz", timeout=10).status_code == 200
        bot.command("job ml/during")
        bot.command("note INC-0001 drained gpu-07")
        targets = sorted(item.target for item in bot.services.incidents.list_open())
        assert targets == ["ml/before", "ml/during"]
        notes = [item.text for item in bot.services.incidents.timeline("INC-0001") if item.kind == "note"]
        assert notes == ["drained gpu-07"]

    direct = db.make_engine(url=direct_url)
    try:
        _assert_every_incident_is_whole(direct)
    finally:
        direct.dispose()


def test_a_connection_lost_mid_transaction_leaves_nothing_half_written(
    slack_stand_in: FaultySlackApi, database_url: str
) -> None:
    with running_bot(database_url=database_url, slack=slack_stand_in) as bot:
        engine = bot.services.incidents.engine
        dropped: list[str] = []

        def drop_connection(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            # The incident and its "opened" entry are already inserted in this transaction.
            if statement.lstrip().upper().startswith("INSERT INTO ROLE_ASSIGNMENT") and not dropped:
                dropped.append(statement)
                raise sqlalchemy.exc.OperationalError(
                    statement, {}, ConnectionError("server closed the connection")
                )

        sqlalchemy.event.listen(engine, "before_cursor_execute", drop_connection)
        slack_stand_in.clear()
        bot.command("job ml/train-7")
        sqlalchemy.event.remove(engine, "before_cursor_execute", drop_connection)

        assert dropped, "the fault was not injected"
        for table in ("incident", "timeline_entry", "role_assignment", "snapshot"):
            assert _count(engine, table) == 0, table
        assert slack_stand_in.calls_to("chat.postMessage") == []
        (told,) = _ephemeral_texts(slack_stand_in)
        assert "try again" in told and "Nothing was changed" in told

        bot.command("job ml/train-7")  # the same person tries again: a whole incident this time
        assert _count(engine, "incident") == 1
        _assert_every_incident_is_whole(engine)


def test_a_briefly_locked_sqlite_file_delays_a_command_but_does_not_fail_it(
    slack_stand_in: FaultySlackApi, tmp_path: Path
) -> None:
    path = tmp_path / "locked.db"
    with running_bot(database_url=f"sqlite:///{path}", slack=slack_stand_in) as bot:
        slack_stand_in.clear()
        locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        locker.execute("BEGIN EXCLUSIVE")
        release = threading.Timer(1.5, lambda: locker.execute("COMMIT"))
        release.start()
        try:
            bot.command("job ml/train-7")
        finally:
            release.join(timeout=10)
            locker.close()
        assert len(bot.services.incidents.list_open()) == 1
        assert _ephemeral_texts(slack_stand_in) == []


_HANGING_SNAPSHOT = """
import sys, time
from bot.config import Settings
from bot.incidents.service import IncidentService
from bot.evidence.targets import parse_target
from storage import db

url = sys.argv[1]

def hang(**_kwargs):
    print("snapshot-running", flush=True)
    time.sleep(120)

service = IncidentService(engine=db.make_engine(url=url), diagnoser=hang)
opened = service.open_for_target(target=parse_target("ml/train-7"), channel_id="C0INC", opened_by="U0ALICE")
service.run_snapshot(incident_key=opened.incident.key, settings=Settings(DATABASE_URL=url), actor="U1")
"""


def _start_serve(*, database_url: str, slack: FaultySlackApi, cwd: Path) -> tuple[subprocess.Popen[str], str]:
    return start_serve(
        slack_base_url=slack.base_url,
        database_url=database_url,
        cwd=cwd,
        extra_env={"TRIAGE_SCHEDULER_ENABLED": "false"},
    )


def test_a_process_killed_mid_snapshot_shows_the_snapshot_interrupted_after_restart(
    slack_stand_in: FaultySlackApi, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    db.upgrade(url=url)
    worker = subprocess.Popen(
        [sys.executable, "-c", _HANGING_SNAPSHOT, url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert worker.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = worker.stdout.readline()
            if "snapshot-running" in line or not line:
                break
        assert "snapshot-running" in line, "the worker never started its snapshot"
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.kill()
        worker.wait(timeout=20)

    served, _address = _start_serve(database_url=url, slack=slack_stand_in, cwd=tmp_path)
    try:
        service = IncidentService(engine=db.make_engine(url=url), diagnoser=None)
        timeline = service.timeline("INC-0001")
        kinds = [item.kind for item in timeline]
        assert kinds[-2:] == ["snapshot_started", SNAPSHOT_INTERRUPTED]
        assert "interrupted" in timeline[-1].text and "not saved" in timeline[-1].text
        assert service.snapshots(incident_key="INC-0001") == []
        assert service.get(incident_key="INC-0001").is_open
        service.engine.dispose()
    finally:
        served.terminate()
        served.wait(timeout=20)


def test_a_snapshot_another_replica_is_still_taking_is_left_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'replicas.db'}"
    db.upgrade(url=url)
    engine = db.make_engine(url=url)
    try:
        first = IncidentService(engine=engine, diagnoser=None)
        opened = first.open_for_target(target=parse_target("ml/train-7"), channel_id="C0INC", opened_by="U0A")
        first.add_timeline_entry(
            incident_key=opened.incident.key,
            actor="triage-bot",
            kind="snapshot_started",
            text="Snapshot started",
            data={"instance": "replica-a", "boot": first.boot_id},
        )
        second = IncidentService(engine=engine, diagnoser=None)
        assert (
            second.recover_interrupted_snapshots(instance_id="replica-b", stale_after=timedelta(minutes=2))
            == []
        )
        assert (
            first.recover_interrupted_snapshots(instance_id="replica-a", stale_after=timedelta(minutes=2))
            == []
        )
        assert second.recover_interrupted_snapshots(instance_id="replica-b", stale_after=timedelta(0)) == [
            "INC-0001"
        ]
        # Once marked, it is not marked again.
        assert second.recover_interrupted_snapshots(instance_id="replica-b", stale_after=timedelta(0)) == []
    finally:
        engine.dispose()
