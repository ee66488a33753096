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
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk.errors import SlackApiError

from handlers.slack.services import Services
from storage import db

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
EVENTS_PATH = "/slack/events"


class Readiness:
    """Named checks; each raises when its dependency is not ready. Slack auth is cached briefly."""

    def __init__(self, *, app: App, services: Services, auth_ttl_seconds: float = 30.0) -> None:
        self._app = app
        self._services = services
        self._auth_ttl = auth_ttl_seconds
        self._auth_ok_until = 0.0
        self._lock = threading.Lock()

    def _database(self) -> None:
        db.ping(engine=self._services.incidents.engine)

    def _slack(self) -> None:
        with self._lock:
            if time.monotonic() < self._auth_ok_until:
                return
        try:
            self._app.client.auth_test()
        except SlackApiError as error:
            raise RuntimeError(f"auth.test: {error.response.get('error')}") from None
        with self._lock:
            self._auth_ok_until = time.monotonic() + self._auth_ttl

    def _scheduler(self) -> None:
        scheduler = self._services.scheduler
        if (
            self._services.settings.scheduler_enabled
            and scheduler is not None
            and not getattr(scheduler, "running", False)
        ):
            raise RuntimeError("scheduler is not running")

    def results(self) -> dict[str, str]:
        """Check name -> "ok" or the reason it is not ready."""
        out = {}
        for name, check in (
            ("database", self._database),
            ("slack", self._slack),
            ("scheduler", self._scheduler),
        ):
            try:
                check()
                out[name] = "ok"
            except Exception as error:  # noqa: BLE001 (report, don't crash the probe)
                out[name] = f"{type(error).__name__}: {error}"[:300]
        return out


def make_wsgi_app(*, app: App, services: Services) -> WSGIApp:
    """Route Slack's request URL to Bolt and the operational endpoints to small handlers."""
    slack = SlackRequestHandler(app)
    readiness = Readiness(app=app, services=services)

    def respond(start_response: StartResponse, status: str, body: bytes, content_type: str) -> list[bytes]:
        start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body]

    def wsgi(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == EVENTS_PATH and method == "POST":
            if not _signature_headers_well_formed(environ):
                return respond(
                    start_response, "401 Unauthorized", b'{"error":"invalid request"}', "application/json"
                )
            return slack(environ, start_response)
        if path == "/healthz":
            return respond(start_response, "200 OK", b'{"status":"ok"}', "application/json")
        if path == "/readyz":
            results = readiness.results()
            ready = all(value == "ok" for value in results.values())
            body = json.dumps({"ready": ready, "checks": results}).encode()
            return respond(
                start_response, "200 OK" if ready else "503 Service Unavailable", body, "application/json"
            )
        if path == "/metrics":
            return respond(
                start_response, "200 OK", generate_latest(services.metrics.registry), CONTENT_TYPE_LATEST
            )
        return respond(start_response, "404 Not Found", b'{"error":"not found"}', "application/json")

    return wsgi


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
            self.server.trigger.pull_trigger(self.server.close)
            self.thread.join(timeout=10)
        if self.thread.is_alive():  # the loop did not take the thunk: close from here as a last resort
            self.server.close()
            self.thread.join(timeout=10)


def create_server(*, wsgi_app: WSGIApp, host: str, port: int, threads: int = 8) -> Any:
    """A waitress server bound to host:port (0 picks a free port)."""
    return waitress.create_server(wsgi_app, host=host, port=port, threads=threads, ident="triage-bot")


def start_in_thread(*, wsgi_app: WSGIApp, host: str = "127.0.0.1", port: int = 0) -> RunningServer:
    """Serve in a daemon thread; returns once the socket is bound."""
    server = create_server(wsgi_app=wsgi_app, host=host, port=port)
    thread = threading.Thread(target=server.run, name="triage-bot-http", daemon=True)
    thread.start()
    return RunningServer(server=server, thread=thread, host=host, port=int(server.effective_port))
