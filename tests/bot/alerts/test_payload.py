"""Alertmanager v4 payloads are validated strictly; anything else is refused with what is wrong."""

from __future__ import annotations

import json

import pytest

from bot.alerts.payload import MAX_ALERTS, MalformedNotification, parse_notification
from tests.bot.alerts.payloads import alert, notification, pod_storm, xid


def test_a_notification_parses_with_its_alerts_identity_and_no_end_while_firing() -> None:
    parsed = parse_notification(json.dumps(notification(xid())).encode())
    (only,) = parsed.alerts
    assert (only.name, only.status, only.ended_at) == ("DCGMXidErrors", "firing", None)
    assert only.identity == only.fingerprint and only.startsAt.tzinfo is not None


def test_an_alert_without_a_fingerprint_gets_one_from_its_labels() -> None:
    first, second = (dict(alert(labels={"alertname": "A", "x": "1"}), fingerprint="") for _ in range(2))
    one, two = parse_notification(json.dumps(notification(first, second)).encode()).alerts
    assert one.identity == two.identity and len(one.identity) == 16


@pytest.mark.parametrize(("body", "message"), [
    (b"not json", "not JSON"),
    (b"[]", "not a JSON object"),
    (json.dumps({**notification(xid()), "version": "3"}).encode(), 'version "4"'),
    (json.dumps({**notification(xid()), "alerts": []}).encode(), "alerts"),
    (json.dumps(notification(dict(xid(), status="pending"))).encode(), "status"),
    (json.dumps(notification(dict(xid(), labels={"bad-name": "x"}))).encode(), "label name"),
    (json.dumps(notification(dict(xid(), labels={}))).encode(), "at least one label"),
    (json.dumps(notification(dict(xid(), generatorURL="javascript:alert(1)"))).encode(), r"http\(s\)"),
    (json.dumps(notification(dict(xid(), fingerprint="../../etc"))).encode(), "hexadecimal"),
    (json.dumps(notification(dict(xid(), startsAt="yesterday"))).encode(), "startsAt"),
    (json.dumps(notification(*pod_storm(count=MAX_ALERTS + 1))).encode(), "alerts"),
])
def test_a_malformed_body_is_refused_naming_the_problem_not_echoing_it(body: bytes, message: str) -> None:
    with pytest.raises(MalformedNotification, match=message) as caught:
        parse_notification(body)
    assert "javascript" not in str(caught.value) and "../../" not in str(caught.value)
