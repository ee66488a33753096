"""Alert intake over a real database (SQLite, and PostgreSQL when configured): one incident per target."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from sqlmodel import Session, select

from bot.alerts.intake import AlertIntake
from bot.alerts.payload import parse_notification
from bot.alerts.routing import RoutingRules, load_rules
from bot.evidence.targets import parse_target
from bot.incidents.policy import Policy
from bot.incidents.service import IncidentService
from storage import db
from storage.tables.alerts import ReceivedAlert
from tests.bot.alerts.payloads import RULES, alert, notification, pod_storm, xid

RESOLVED_AT = "2026-03-01T11:00:00Z"


@pytest.fixture
def engine(database_url: str) -> Iterator[sqlalchemy.Engine]:
    db.upgrade(url=database_url)
    built = db.make_engine(url=database_url)
    yield built
    built.dispose()


@pytest.fixture
def rules(tmp_path: Path) -> RoutingRules:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES, encoding="utf-8")
    return load_rules(path)


@pytest.fixture
def incidents(engine: sqlalchemy.Engine) -> IncidentService:
    return IncidentService(engine=engine, diagnoser=None)


@pytest.fixture
def intake(engine: sqlalchemy.Engine, incidents: IncidentService, rules: RoutingRules) -> AlertIntake:
    return AlertIntake(engine=engine, incidents=incidents, rules=rules)


def _send(intake: AlertIntake, *alerts: dict) -> object:
    return intake.process(parse_notification(json.dumps(notification(*alerts)).encode()))


def _rows(engine: sqlalchemy.Engine) -> list[ReceivedAlert]:
    with Session(engine) as session:
        return list(session.exec(select(ReceivedAlert).order_by(ReceivedAlert.id)))


def test_a_storm_of_500_pod_alerts_for_one_job_opens_one_incident(
    intake: AlertIntake, incidents: IncidentService, engine: sqlalchemy.Engine
) -> None:
    result = _send(intake, *pod_storm(count=500))
    (opened,) = result.opened
    assert opened.incident.target == "job/ml/train-llm" and opened.incident.channel_id == "C0MLOPS"
    assert opened.incident.severity == "high" and opened.incident.opened_by == "triage-bot"
    assert opened.incident.title.startswith("Alert KubePodCrashLooping [warning] ×500: Pod ml/train-llm-0 is crash")
    assert "http://alertmanager:9093/#/alerts?filter=" in opened.incident.title
    assert len(opened.alerts) == 500 and len(incidents.list_open()) == 1
    rows = _rows(engine)
    assert len(rows) == 500 and {row.incident_key for row in rows} == {opened.incident.key}
    assert [item.kind for item in incidents.timeline(opened.incident.key)].count("alert") == 1


def test_repeated_notifications_of_a_group_open_and_post_nothing_more(
    intake: AlertIntake, incidents: IncidentService, engine: sqlalchemy.Engine
) -> None:
    storm = pod_storm(count=50)
    _send(intake, *storm)
    again = _send(intake, *storm)
    assert (again.opened, again.linked, again.repeated) == ((), (), 50)
    assert {row.notifications for row in _rows(engine)} == {2} and len(_rows(engine)) == 50
    assert len(incidents.list_open()) == 1


def test_new_pods_of_the_same_job_link_to_its_incident_in_one_entry(
    intake: AlertIntake, incidents: IncidentService
) -> None:
    first = _send(intake, *pod_storm(count=3))
    more = [alert(labels={**item["labels"], "pod": item["labels"]["pod"] + "b"}) for item in pod_storm(count=4)]
    result = _send(intake, *more)
    (linked,) = result.linked
    assert linked.incident.key == first.opened[0].incident.key and len(linked.alerts) == 4
    assert incidents.timeline(linked.incident.key)[-1].text.startswith("4 firing alert(s) linked")


def test_an_alert_about_a_workload_someone_already_triaged_joins_their_incident(
    intake: AlertIntake, incidents: IncidentService
) -> None:
    human = incidents.open_for_target(target=parse_target("ml/train-llm"), channel_id="C0HUMAN",
                                      opened_by="U0ALICE").incident
    result = _send(intake, *pod_storm(count=2))
    assert result.opened == () and result.linked[0].incident.key == human.key
    assert incidents.get(incident_key=human.key).channel_id == "C0HUMAN"


def test_a_gpu_alert_opens_one_incident_for_the_node_whatever_gpu_or_pod_it_names(
    intake: AlertIntake, incidents: IncidentService
) -> None:
    result = _send(intake, xid(gpu="3"), xid(gpu="5"))
    (opened,) = result.opened
    assert opened.incident.target == "node:gpu-node-05" and opened.incident.severity == "critical"
    assert opened.incident.channel_id == "C0ALERTS" and opened.gpu["gpu"] == "3"


def test_record_only_and_unmatched_alerts_open_nothing(intake: AlertIntake, incidents: IncidentService,
                                                        engine: sqlalchemy.Engine) -> None:
    result = _send(intake, alert(labels={"alertname": "Watchdog", "severity": "info"}),
                   alert(labels={"alertname": "Unrouted", "namespace": "ml", "job_name": "x"}))
    assert (result.opened, result.recorded) == ((), 2)
    assert incidents.list_open() == [] and {row.action for row in _rows(engine)} == {"record"}


def test_an_opening_alert_whose_labels_name_no_target_is_recorded_with_the_reason(
    intake: AlertIntake, engine: sqlalchemy.Engine
) -> None:
    result = _send(intake, alert(labels={"alertname": "KubeJobFailed", "instance": "10.0.0.7:8080"}))
    assert result.unmapped == 1 and result.opened == ()
    (row,) = _rows(engine)
    assert row.action == "unmapped" and "is an address" in row.note


def test_resolutions_go_on_the_timeline_and_only_the_last_one_suggests_resolving(
    intake: AlertIntake, incidents: IncidentService
) -> None:
    first, second = pod_storm(count=2)
    key = _send(intake, first, second).opened[0].incident.key
    partial = _send(intake, dict(first, status="resolved", endsAt=RESOLVED_AT))
    assert partial.resolved[0].all_resolved is False
    last = _send(intake, dict(second, status="resolved", endsAt=RESOLVED_AT))
    assert last.resolved[0].all_resolved is True and last.resolved[0].total == 2
    kinds = [item.kind for item in incidents.timeline(key)]
    assert kinds.count("alert_resolved") == 2 and kinds.count("alerts_all_resolved") == 1
    repeat = _send(intake, dict(second, status="resolved", endsAt=RESOLVED_AT))
    assert repeat.resolved == ()  # a resolved notification repeated says nothing twice
    assert incidents.get(incident_key=key).status == "investigating"  # suggested, never resolved by the bot


def test_a_resolution_reported_with_another_start_still_resolves_the_firing_alert(
    intake: AlertIntake, incidents: IncidentService
) -> None:
    """Alertmanager reports `startsAt = endsAt` for an end posted before the alert's own start was merged."""
    firing = xid()
    key = _send(intake, firing).opened[0].incident.key
    result = _send(intake, dict(firing, status="resolved", startsAt="2026-03-01T10:00:00Z",
                                endsAt="2026-03-01T10:00:00Z"))
    assert result.resolved[0].all_resolved is True
    assert incidents.timeline(key)[-1].kind == "alerts_all_resolved"


def test_an_incident_someone_resolved_is_not_reopened_by_its_alert_repeating(
    intake: AlertIntake, incidents: IncidentService
) -> None:
    storm = pod_storm(count=2)
    key = _send(intake, *storm).opened[0].incident.key
    admin = IncidentService(engine=intake.engine, diagnoser=None, policy=Policy(admins=frozenset({"U0ADMIN"})))
    admin.set_status(incident_key=key, status="resolved", actor="U0ADMIN")
    assert _send(intake, *storm).opened == ()
    refired = [dict(item, startsAt="2026-03-02T10:00:00Z") for item in storm]
    assert len(_send(intake, *refired).opened) == 1  # a new firing (new startsAt) is a new incident


def test_the_storm_guard_records_instead_of_opening_past_its_limit(
    intake: AlertIntake, incidents: IncidentService, engine: sqlalchemy.Engine
) -> None:
    result = _send(intake, *(xid(node=f"gpu-node-{index:02d}") for index in range(1, 6)))
    assert len(result.opened) == 3 and result.held == 2
    held = [row for row in _rows(engine) if row.action == "held"]
    assert len(held) == 2 and all("storm guard" in row.note for row in held)
    assert len(incidents.list_open()) == 3


def test_two_replicas_given_the_same_notification_open_one_incident(
    engine: sqlalchemy.Engine, incidents: IncidentService, rules: RoutingRules
) -> None:
    body = json.dumps(notification(*pod_storm(count=40))).encode()
    replicas = [AlertIntake(engine=engine, incidents=IncidentService(engine=engine, diagnoser=None), rules=rules)
                for _ in range(2)]
    results: list[object] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(replica: AlertIntake) -> None:
        barrier.wait()
        try:
            results.append(replica.process(parse_notification(body)))
        except BaseException as error:  # noqa: BLE001 - collected for the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(replica,)) for replica in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(incidents.list_open()) == 1 and len(_rows(engine)) == 40
    assert sum(len(item.opened) for item in results) == 1
