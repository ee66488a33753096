"""The one production HTTP server (waitress): /slack/events, /healthz, /readyz, /metrics."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import waitress
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from bot.config import Settings
from handlers.ops.paths import ALERTS_PATH, EVENTS_PATH

log = logging.getLogger(__name__)

MALFORMED = b'{"error":"malformed request"}'
StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Check = Callable[[], None]


class Readiness:
    """Named checks, each raising when its dependency is not ready; `cached` ones are trusted for a while."""

    def __init__(self, *, checks: dict[str, Check], cached: frozenset[str] = frozenset(), ttl_seconds: float = 30.0,
                 details: dict[str, Callable[[], dict[str, str]]] | None = None) -> None:
        self._checks = checks
        # Reported beside the checks, never deciding readiness (e.g. each cluster: one down keeps the bot ready).
        self._details = details or {}
        self._cached = cached
        self._ttl = ttl_seconds
        self._ok_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def results(self) -> dict[str, str]:
        """Check name -> "ok" or the reason it is not ready."""
        out = {}
        for name, check in self._checks.items():
            with self._lock:
                if time.monotonic() < self._ok_until.get(name, 0.0):
                    out[name] = "ok"
                    continue
            try:
                check()
                out[name] = "ok"
                if name in self._cached:
                    with self._lock:
                        self._ok_until[name] = time.monotonic() + self._ttl
            except Exception as error:  # noqa: BLE001 (report, don't crash the probe)
                out[name] = f"{type(error).__name__}: {error}"[:300]
        return out

    def details(self) -> dict[str, dict[str, str]]:
        """Each detail's entries ("ok" or what is wrong), or the error that kept it from answering."""
        out: dict[str, dict[str, str]] = {}
        for name, detail in self._details.items():
            try:
                out[name] = dict(detail())
            except Exception as error:  # noqa: BLE001 (report, don't crash the probe)
                out[name] = {"error": f"{type(error).__name__}: {error}"[:300]}
        return out


def make_wsgi_app(
    *,
    events: WSGIApp | None,
    readiness: Readiness,
    registry: CollectorRegistry,
    alerts: WSGIApp | None = None,
    details: Callable[[], dict[str, Any]] | None = None,
    events_max_bytes: int = 1_048_576,
) -> WSGIApp:
    """Route Slack's request URL to the Slack edge (nothing is accepted there without `events`: no signing
    secret, Socket Mode), Alertmanager's to the alert intake (when configured), and the operational endpoints to
    small handlers; `details` adds facts to /readyz that do not gate readiness."""

    def respond(start_response: StartResponse, status: str, body: bytes, content_type: str) -> list[bytes]:
        start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body]

    def wsgi(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == EVENTS_PATH and method == "POST":
            if events is None:
                return respond(
                    start_response, "404 Not Found",
                    b'{"error":"Slack events are not served over HTTP without SLACK_SIGNING_SECRET"}',
                    "application/json",
                )
            if not _signature_headers_well_formed(environ):
                return respond(
                    start_response, "401 Unauthorized", b'{"error":"invalid request"}', "application/json"
                )
            if _content_length(environ) > events_max_bytes:  # Slack's payloads are small: refused unread
                return respond(start_response, "413 Payload Too Large", b'{"error":"body too large"}', "application/json")
            try:
                return events(environ, start_response)
            except Exception as error:  # noqa: BLE001 (a body the Slack adapter cannot even parse)
                log.warning("refused a Slack request the adapter could not parse: %s", type(error).__name__)
                return respond(start_response, "400 Bad Request", MALFORMED, "application/json")
        if path == ALERTS_PATH:
            if alerts is None:
                return respond(start_response, "404 Not Found",
                               b'{"error":"alert intake is off: set TRIAGE_ALERTS_TOKEN"}', "application/json")
            return alerts(environ, start_response)
        if path == "/healthz":
            return respond(start_response, "200 OK", b'{"status":"ok"}', "application/json")
        if path == "/readyz":
            results = readiness.results()
            ready = all(value == "ok" for value in results.values())
            body = json.dumps(
                {"ready": ready, "checks": results, **readiness.details(), **(details() if details else {})}
            ).encode()
            return respond(
                start_response, "200 OK" if ready else "503 Service Unavailable", body, "application/json"
            )
        if path == "/metrics":
            return respond(start_response, "200 OK", generate_latest(registry), CONTENT_TYPE_LATEST)
        return respond(start_response, "404 Not Found", b'{"error":"not found"}', "application/json")

    return wsgi


def _content_length(environ: dict[str, Any]) -> int:
    try:
        return int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _signature_headers_well_formed(environ: dict[str, Any]) -> bool:
    """Refuse what slack_sdk's verifier would crash on (500) instead of refusing (401): a non-numeric
    timestamp (`int()` raises) or a non-ASCII signature (`hmac.compare_digest` raises)."""
    timestamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP")
    signature = environ.get("HTTP_X_SLACK_SIGNATURE")
    if timestamp is not None and not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        return False
    return signature is None or signature.isascii()


@dataclasses.dataclass(kw_only=True)
class RunningServer:
    """A waitress server serving in a background thread (tests, demo); `stop()` frees the port."""

    server: Any
    thread: threading.Thread
    host: str
    port: int

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:41234."""
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """Close every socket from inside the serving loop (no race with its select), then join it."""
        if self.thread.is_alive():
            try:
                self.server.trigger.pull_trigger(self.server.close)
            except OSError:  # the loop closed its trigger already: it is shutting down on its own
                pass
            self.thread.join(timeout=10)
        if self.thread.is_alive():  # the loop did not take the thunk: close from here as a last resort
            self.server.close()
            self.thread.join(timeout=10)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerLimits:
    """What one client can hold: waitress's default of 100 connections, kept open two minutes when idle,
    let about 100 idle sockets take `/healthz` and Slack's requests offline; these defaults do not."""

    threads: int = 8
    connection_limit: int = 1000
    idle_timeout_seconds: int = 10
    # A backstop above every path's own cap (Slack events 1 MiB, alerts 4 MiB by default), so each path
    # answers an oversized body itself and nothing larger is ever buffered.
    max_body_bytes: int = 8_388_608

    @classmethod
    def from_settings(cls, settings: Settings) -> ServerLimits:
        """TRIAGE_HTTP_THREADS, _CONNECTION_LIMIT, _IDLE_TIMEOUT_SECONDS, _MAX_BODY_BYTES."""
        return cls(
            threads=settings.http_threads,
            connection_limit=settings.http_connection_limit,
            idle_timeout_seconds=settings.http_idle_timeout_seconds,
            max_body_bytes=2 * max(settings.http_max_body_bytes, settings.alerts_max_body_bytes),
        )


def create_server(*, wsgi_app: WSGIApp, host: str, port: int, limits: ServerLimits | None = None) -> Any:
    """A waitress server bound to host:port (0 picks a free port). Idle and stalled clients are closed after
    `idle_timeout_seconds` (checked at least every few seconds); poll() lifts select()'s 1024-socket ceiling."""
    limits = limits or ServerLimits()
    return waitress.create_server(
        wsgi_app,
        host=host,
        port=port,
        threads=limits.threads,
        connection_limit=limits.connection_limit,
        channel_timeout=limits.idle_timeout_seconds,
        cleanup_interval=max(1, min(5, limits.idle_timeout_seconds // 2)),
        max_request_body_size=limits.max_body_bytes,
        max_request_header_size=65_536,
        asyncore_use_poll=True,
        ident="triage-bot",
    )


def start_in_thread(
    *, wsgi_app: WSGIApp, host: str = "127.0.0.1", port: int = 0, limits: ServerLimits | None = None
) -> RunningServer:
    """Serve in a daemon thread; returns once the socket is bound."""
    server = create_server(wsgi_app=wsgi_app, host=host, port=port, limits=limits)
    thread = threading.Thread(target=server.run, name="triage-bot-http", daemon=True)
    thread.start()
    return RunningServer(server=server, thread=thread, host=host, port=int(server.effective_port))
