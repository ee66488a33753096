"""`POST /alerts/alertmanager`: authenticate, bound, validate, enqueue; never more work than the queue holds.

Alertmanager sends its webhook with `http_config.authorization` (a bearer token from a Secret). A request
without the exact token gets 401, a body that is not an Alertmanager v4 payload 400, one over the size cap
413; none of them changes anything. A valid notification is queued for the worker and answered 200 at once;
when the queue is full it is shed with 503 and Retry-After (Alertmanager retries later), counted in
`triage_alert_notifications_total{outcome="shed"}` and shown on /readyz.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from bot.alerts.payload import MalformedNotification, Notification, parse_notification

StartResponse = Callable[..., Any]
MIN_TOKEN_CHARS = 16
RETRY_AFTER_SECONDS = 30


class AlertMetrics:
    """The intake's series on the bot's registry."""

    def __init__(self, *, registry: CollectorRegistry, depth: Callable[[], int]) -> None:
        self.notifications = Counter(
            "triage_alert_notifications", "Alertmanager webhook calls, by outcome (accepted, shed, unauthorized, "
            "malformed, too_large).", ["outcome"], registry=registry)
        self.alerts = Counter("triage_alerts", "Alerts processed, by what the intake did (opened, linked, recorded, "
                              "unmapped, held, repeated, resolved).", ["action"], registry=registry)
        self.incidents = Counter("triage_alert_incidents", "Incidents opened or linked by alerts.", ["result"],
                                 registry=registry)
        self.root_seconds = Histogram(
            "triage_alert_root_seconds", "From receiving a notification to the new incident's root message.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0), registry=registry)
        self.depth = Gauge("triage_alert_queue_depth", "Notifications waiting for the worker.", registry=registry)
        self.depth.set_function(lambda: float(depth()))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Queued:
    """One accepted notification and when it arrived (for time-to-root)."""

    notification: Notification
    received_at: float


class AlertQueue:
    """A bounded queue with the shedding account /readyz shows."""

    def __init__(self, *, capacity: int) -> None:
        self.capacity = capacity
        self._queue: queue.Queue[Queued] = queue.Queue(maxsize=capacity)
        self._lock = threading.Lock()
        self.shed_total = 0
        self.last_shed_at: float | None = None
        self.accepted_total = 0

    def offer(self, item: Queued) -> bool:
        """Enqueue, or count it shed when full."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self.shed_total += 1
                self.last_shed_at = time.time()
            return False
        with self._lock:
            self.accepted_total += 1
        return True

    def take(self, *, timeout: float) -> Queued | None:
        """The next notification, or None after `timeout` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def done(self) -> None:
        """The worker finished one."""
        self._queue.task_done()

    def depth(self) -> int:
        """Notifications waiting."""
        return self._queue.qsize()

    def status(self) -> dict[str, Any]:
        """For /readyz: how full the queue is and how much was shed."""
        with self._lock:
            return {"queued": self.depth(), "capacity": self.capacity, "accepted_total": self.accepted_total,
                    "shed_total": self.shed_total,
                    "last_shed_at": None if self.last_shed_at is None else
                    time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.last_shed_at))}


def check_token(token: str | None) -> str:
    """The configured token, refused when too short to be a secret."""
    if not token or len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"TRIAGE_ALERTS_TOKEN must be at least {MIN_TOKEN_CHARS} characters (use a random secret, "
                         "e.g. `openssl rand -hex 32`), stored in a Secret that Alertmanager's http_config reads too")
    return token


def authorized(environ: dict[str, Any], *, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared in constant time."""
    header = environ.get("HTTP_AUTHORIZATION") or ""
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() != "bearer" or not credentials:
        return False
    try:
        given = credentials.strip().encode("latin-1")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(given, token.encode("utf-8"))


def make_alerts_app(*, token: str, alert_queue: AlertQueue, max_body_bytes: int, metrics: AlertMetrics,
                    work_begin: Callable[[], None], work_end: Callable[[], None],
                    ) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The WSGI handler for ALERTS_PATH; a queued notification counts as work in flight until the worker ends it."""

    def respond(start_response: StartResponse, status: str, payload: dict[str, Any],
                headers: list[tuple[str, str]] | None = None) -> list[bytes]:
        body = json.dumps(payload).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                *(headers or [])])
        return [body]

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return respond(start_response, "405 Method Not Allowed", {"error": "POST an Alertmanager webhook"},
                           [("Allow", "POST")])
        if not authorized(environ, token=token):
            metrics.notifications.labels(outcome="unauthorized").inc()
            return respond(start_response, "401 Unauthorized", {"error": "a valid bearer token is required"},
                           [("WWW-Authenticate", 'Bearer realm="triage-bot alerts"')])
        try:
            declared = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = -1
        if declared < 0 or declared > max_body_bytes:
            metrics.notifications.labels(outcome="too_large").inc()
            return respond(start_response, "413 Content Too Large",
                           {"error": f"the body must be declared (Content-Length) and at most {max_body_bytes} bytes"})
        body = environ["wsgi.input"].read(declared) if declared else b""
        try:
            notification = parse_notification(body)
        except MalformedNotification as error:
            metrics.notifications.labels(outcome="malformed").inc()
            return respond(start_response, "400 Bad Request", {"error": str(error)})
        work_begin()  # before the worker can take it, so shutdown and tests see it in flight
        if not alert_queue.offer(Queued(notification=notification, received_at=time.monotonic())):
            work_end()
            metrics.notifications.labels(outcome="shed").inc()
            return respond(start_response, "503 Service Unavailable",
                           {"error": "the alert queue is full; retry later", "queue": alert_queue.status()},
                           [("Retry-After", str(RETRY_AFTER_SECONDS))])
        metrics.notifications.labels(outcome="accepted").inc()
        return respond(start_response, "200 OK", {"status": "accepted", "alerts": len(notification.alerts)})

    return app
