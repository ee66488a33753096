"""The incident lifecycle on a real, migrated database (SQLite and PostgreSQL)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from bot.config import Settings
from bot.evidence.targets import parse_target
from bot.incidents.policy import Policy
from bot.incidents.service import IncidentError, IncidentNotFound, IncidentService
from bot.lab.demo import minimal_diagnoser
from storage import db
from storage.db import session_scope
from storage.tables import Incident, Snapshot, TimelineEntry


class TickingClock:
    """A deterministic clock; it can be told to fail on a given call to simulate a crash mid-write."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
        self.calls = 0
        self.fail_on_call: int | None = None

    def __call__(self) -> datetime:
        self.calls += 1
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise RuntimeError("simulated crash in the middle of a write")
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def clock() -> TickingClock:
    return TickingClock()


@pytest.fixture
def service(database_url: str, clock: TickingClock) -> Iterator[IncidentService]:
    db.upgrade(url=database_url)
    engine = db.make_engine(url=database_url)
    yield IncidentService(engine=engine, diagnoser=minimal_diagnoser, clock=clock)
    engine.dispose()


def _count(service: IncidentService, table: type) -> int:
    with session_scope(service.engine) as session:
        return len(session.exec(select(table)).all())


def test_opening_gives_a_human_key_and_makes_the_opener_commander(service: IncidentService) -> None:
    result = service.open_for_target(target=parse_target("ml/train-1"), channel_id="C1", opened_by="U1")
    assert result.created
    assert result.incident.key == "INC-0001"
    assert result.incident.status == "investigating"
    assert result.incident.holders("commander") == ("U1",)
    assert [item.kind for item in service.timeline("INC-0001")] == ["opened", "assign"]


def test_a_second_open_for_the_same_workload_returns_the_first(service: IncidentService) -> None:
    first = service.open_for_target(target=parse_target("ml/train-1"), channel_id="C1", opened_by="U1")
    again = service.open_for_target(target=parse_target("job/ml/train-1"), channel_id="C2", opened_by="U2")
    assert not again.created
    assert again.incident.key == first.incident.key
    assert _count(service, Incident) == 1


def test_different_workloads_get_consecutive_keys(service: IncidentService) -> None:
    keys = [
        service.open_for_target(target=parse_target(raw), channel_id="C1", opened_by="U1").incident.key
        for raw in ("ml/a", "ml/b", "88123")
    ]
    assert keys == ["INC-0001", "INC-0002", "INC-0003"]


def test_a_resolved_workload_can_be_opened_again(service: IncidentService) -> None:
    first = service.open_for_target(
        target=parse_target("ml/train-1"), channel_id="C1", opened_by="U1"
    ).incident
    service.set_status(incident_key=first.key, status="resolved", actor="U1")
    second = service.open_for_target(target=parse_target("ml/train-1"), channel_id="C1", opened_by="U1")
    assert second.created and second.incident.key != first.key


def test_the_database_itself_refuses_a_second_open_incident_for_a_workload(service: IncidentService) -> None:
    service.open_for_target(target=parse_target("ml/train-1"), channel_id="C1", opened_by="U1")
    now = datetime.now(UTC)
    with pytest.raises(IntegrityError), session_scope(service.engine) as session:
        session.add(
            Incident(
                number=99,
                key="INC-0099",
                title="dup",
                target="ml/train-1",
                target_platform="kubernetes",
                workload_key="ml/train-1",
                channel_id="C1",
                opened_by="U9",
                opened_at=now,
                updated_at=now,
            )
        )
    assert _count(service, Incident) == 1


def test_keys_have_no_gaps_when_replicas_race_for_different_workloads(database_url: str) -> None:
    db.upgrade(url=database_url)
    engines = [db.make_engine(url=database_url) for _ in range(2)]
    replicas = [IncidentService(engine=engine, diagnoser=None) for engine in engines]
    start = threading.Barrier(4)
    keys: list[str] = []
    lock = threading.Lock()

    def open_it(replica: IncidentService, name: str) -> None:
        start.wait()
        key = replica.open_for_target(
            target=parse_target(f"ml/{name}"), channel_id="C1", opened_by="U1"
        ).incident.key
        with lock:
            keys.append(key)

    threads = [threading.Thread(target=open_it, args=(replicas[n % 2], f"job-{n}")) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sorted(keys) == ["INC-0001", "INC-0002", "INC-0003", "INC-0004"]
    finally:
        for engine in engines:
            engine.dispose()


def test_concurrent_opens_from_two_replicas_create_one_incident(database_url: str) -> None:
    db.upgrade(url=database_url)
    engines = [db.make_engine(url=database_url) for _ in range(2)]
    replicas = [IncidentService(engine=engine, diagnoser=None) for engine in engines]
    start = threading.Barrier(len(replicas) * 3)
    results = []
    lock = threading.Lock()

    def open_it(replica: IncidentService) -> None:
        start.wait()
        result = replica.open_for_target(target=parse_target("ml/race"), channel_id="C1", opened_by="U1")
        with lock:
            results.append(result)

    threads = [threading.Thread(target=open_it, args=(replica,)) for replica in replicas for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sum(result.created for result in results) == 1
        assert len({result.incident.key for result in results}) == 1
    finally:
        for engine in engines:
            engine.dispose()


def test_a_failure_mid_open_leaves_no_half_made_incident(
    service: IncidentService, clock: TickingClock
) -> None:
    clock.fail_on_call = clock.calls + 2  # after the incident row is flushed, before its timeline is done
    with pytest.raises(RuntimeError, match="simulated crash"):
        service.open_for_target(target=parse_target("ml/train-1"), channel_id="C1", opened_by="U1")
    assert _count(service, Incident) == 0
    assert _count(service, TimelineEntry) == 0
    clock.fail_on_call = None
    assert service.open_for_target(target=parse_target("ml/train-1"), channel_id="C1", opened_by="U1").created


def test_status_changes_are_on_the_timeline_with_actor_and_utc_time(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    service.assign(incident_key=key, user_id="U2", role="commander", actor="U1")
    service.set_status(incident_key=key, status="Mitigated", actor="U2")
    with pytest.raises(IncidentError, match="Only the commander"):
        service.set_status(incident_key=key, status="resolved", actor="U1")  # U1 handed command over
    resolved = service.set_status(incident_key=key, status="resolved", actor="U2")
    assert resolved.resolved_at is not None and resolved.resolved_at.tzinfo is not None
    entries = [item for item in service.timeline(key) if item.kind == "status"]
    assert [(item.actor, item.data["to"]) for item in entries] == [("U2", "mitigated"), ("U2", "resolved")]
    assert all(item.at.utcoffset() == timedelta(0) for item in entries)


def test_an_unknown_status_is_refused_with_the_valid_ones(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    with pytest.raises(IncidentError, match="investigating, identified"):
        service.set_status(incident_key=key, status="fixed", actor="U1")


def test_setting_the_status_it_already_has_is_refused_without_a_timeline_entry(
    service: IncidentService,
) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    before = len(service.timeline(key))
    with pytest.raises(IncidentError, match="already investigating"):
        service.set_status(incident_key=key, status="investigating", actor="U1")
    assert len(service.timeline(key)) == before


def test_a_resolved_incident_refuses_further_status_changes(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    service.set_status(incident_key=key, status="resolved", actor="U1")
    with pytest.raises(IncidentError, match="already resolved"):
        service.set_status(incident_key=key, status="monitoring", actor="U1")


def test_severity_changes_are_validated_and_on_the_timeline(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    with pytest.raises(IncidentError, match="critical, high"):
        service.set_severity(incident_key=key, severity="urgent", actor="U1")
    assert service.set_severity(incident_key=key, severity="Critical", actor="U1").severity == "critical"
    (entry,) = [item for item in service.timeline(key) if item.kind == "severity"]
    assert entry.data["to"] == "critical" and entry.actor == "U1"


def test_reopening_brings_a_resolved_incident_back_unless_its_workload_has_another(
    service: IncidentService,
) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    with pytest.raises(IncidentError, match="not resolved"):
        service.reopen(incident_key=key, actor="U1")
    service.set_status(incident_key=key, status="resolved", actor="U1")
    reopened = service.reopen(incident_key=key, actor="U1")
    assert reopened.status == "investigating" and reopened.resolved_at is None
    service.set_status(incident_key=key, status="resolved", actor="U1")
    service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U2")  # a newer one
    with pytest.raises(IncidentError, match="another open incident"):
        service.reopen(incident_key=key, actor="U1")
    assert service.get(incident_key=key).status == "resolved"


def test_assigning_a_commander_replaces_the_previous_one(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    updated = service.assign(incident_key=key, user_id="U2", role="commander", actor="U1")
    assert updated.holders("commander") == ("U2",)
    assert service.timeline(key)[-1].data["replaced"] == ["U1"]


def test_only_the_commander_or_an_admin_hands_over_command(database_url: str) -> None:
    db.upgrade(url=database_url)
    engine = db.make_engine(url=database_url)
    service = IncidentService(engine=engine, diagnoser=None, policy=Policy(admins=frozenset({"UADMIN"})))
    try:
        key = service.open_for_target(
            target=parse_target("ml/t"), channel_id="C1", opened_by="U1"
        ).incident.key
        with pytest.raises(IncidentError, match="Only the commander"):
            service.assign(incident_key=key, user_id="U2", role="commander", actor="U2")
        assert service.get(incident_key=key).holders("commander") == ("U1",)
        assert service.assign(incident_key=key, user_id="U3", role="commander", actor="UADMIN").holders(
            "commander"
        ) == ("U3",)
        assert service.assign(incident_key=key, user_id="U2", role="owner", actor="U2").holders("owner") == (
            "U2",
        )
    finally:
        engine.dispose()


def test_old_request_fingerprints_are_pruned(service: IncidentService, clock: TickingClock) -> None:
    service.claim_request(fingerprint="cmd:old", kind="command:job")
    cutoff = clock.now + timedelta(seconds=30)
    clock.now = cutoff + timedelta(minutes=5)
    service.claim_request(fingerprint="cmd:new", kind="command:job")
    assert service.prune_processed_requests(older_than=cutoff) == 1
    assert service.claim_request(fingerprint="cmd:old", kind="command:job")
    assert not service.claim_request(fingerprint="cmd:new", kind="command:job")


def test_observers_accumulate_and_layer_owners_are_one_per_layer(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    service.assign(incident_key=key, user_id="U2", role="observer", actor="U1")
    service.assign(incident_key=key, user_id="U3", role="observer", actor="U1")
    service.assign(incident_key=key, user_id="U4", role="owner:fabric", actor="U1")
    updated = service.assign(incident_key=key, user_id="U5", role="OWNER:fabric", actor="U1")
    assert updated.holders("observer") == ("U2", "U3")
    assert updated.holders("owner:fabric") == ("U5",)


@pytest.mark.parametrize("role", ["boss", "owner:gpu", ""])
def test_an_unknown_role_is_refused_and_nothing_is_written(service: IncidentService, role: str) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    before = len(service.timeline(key))
    with pytest.raises(IncidentError, match="role|layer"):
        service.assign(incident_key=key, user_id="U2", role=role, actor="U1")
    assert len(service.timeline(key)) == before


def test_notes_must_have_text_and_fit(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    with pytest.raises(IncidentError, match="empty"):
        service.add_note(incident_key=key, text="   ", actor="U1")
    with pytest.raises(IncidentError, match="at most"):
        service.add_note(incident_key=key, text="x" * 3001, actor="U1")
    note = service.add_note(incident_key=key, text="  checked the node  ", actor="U2")
    assert (note.actor, note.text) == ("U2", "checked the node")


def test_a_snapshot_is_stored_with_observations_and_sets_severity_and_layer(service: IncidentService) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    report = service.run_snapshot(incident_key=key, settings=Settings(), actor="U1")
    stored = service.snapshots(incident_key=key)
    assert stored == [report.to_dict(include_observations=True)]
    assert stored[0]["observations"]
    incident = service.get(incident_key=key)
    assert (incident.severity, incident.verdict_layer) == ("high", "runtime")
    assert service.open_count_by_severity() == {"high": 1}


def test_a_failure_while_recording_a_snapshot_stores_nothing(
    service: IncidentService, clock: TickingClock
) -> None:
    key = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident.key
    report = minimal_diagnoser(target=parse_target("ml/t"), settings=Settings())
    entries_before = len(service.timeline(key))
    clock.fail_on_call = clock.calls + 2  # the snapshot row is added; the timeline entry's clock read fails
    with pytest.raises(RuntimeError):
        service.record_snapshot(incident_key=key, report=report)
    assert _count(service, Snapshot) == 0
    assert len(service.timeline(key)) == entries_before
    assert service.get(incident_key=key).severity is None


def test_the_channel_lookup_explains_none_and_several(service: IncidentService) -> None:
    with pytest.raises(IncidentNotFound, match="/triage job"):
        service.open_in_channel(channel_id="C1")
    service.open_for_target(target=parse_target("ml/a"), channel_id="C1", opened_by="U1")
    assert service.open_in_channel(channel_id="C1").key == "INC-0001"
    service.open_for_target(target=parse_target("ml/b"), channel_id="C1", opened_by="U1")
    with pytest.raises(IncidentError, match="2 open incidents"):
        service.open_in_channel(channel_id="C1")


def test_a_request_fingerprint_is_claimed_once(service: IncidentService) -> None:
    assert service.claim_request(fingerprint="cmd:123.abc", kind="command:job")
    assert not service.claim_request(fingerprint="cmd:123.abc", kind="command:job")


def test_an_unknown_key_says_how_to_find_the_open_ones(service: IncidentService) -> None:
    with pytest.raises(IncidentNotFound, match="/triage list"):
        service.get(incident_key="INC-0404")


def test_views_are_frozen_plain_data(service: IncidentService) -> None:
    view = service.open_for_target(target=parse_target("ml/t"), channel_id="C1", opened_by="U1").incident
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.status = "resolved"  # type: ignore[misc]
