"""A local stand-in for the Slack Web API: stdlib HTTP on 127.0.0.1 that records every call.

It answers the methods the bot uses the way Slack does (form or JSON bodies, `Authorization: Bearer`,
`{"ok": false, "error": ...}` with HTTP 200, HTTP 429 with `Retry-After`), so the real slack_sdk
WebClient talks to it through `base_url`. Tests and `triage-bot demo` both use it. `apps.connections.open`
takes the app-level token and answers with the URL of whatever Socket Mode server is attached
(`socket_mode_url`), as Slack answers with its `wss://` link.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

BOT_TOKEN = "xoxb-lab-0000-triage"
TEAM_ID = "T0LAB"
BOT_USER_ID = "U0TRIAGEBOT"
APP_TOKEN = "xapp-1-A0TRIAGE-lab-0000"
# Methods that take the app-level token (`xapp-`) instead of the bot token.
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordedCall:
    """One request that reached the stand-in."""

    method: str
    params: dict[str, Any]
    token: str | None
    at: float


@dataclasses.dataclass(kw_only=True)
class _Failure:
    error: str | None = None
    retry_after: int | None = None
    status: int | None = None
    remaining: int = 1


class SlackApiStandIn:
    """Start with `start()`, point a WebClient at `base_url`, read `calls`; `stop()` when done."""

    def __init__(
        self, *, token: str = BOT_TOKEN, app_token: str = APP_TOKEN, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.token = token
        self.app_token = app_token
        # Issues a fresh Socket Mode URL per `apps.connections.open`; None: no Socket Mode server attached.
        self.socket_mode_url: Callable[[], str] | None = None
        self._calls: list[RecordedCall] = []
        self._failures: dict[str, list[_Failure]] = {}
        self._lock = threading.Condition()
        self._ts = itertools.count(1)
        self._file_ids = itertools.count(1)
        self.uploads: dict[str, bytes] = {}
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    def response_url(self, name: str = "cmd") -> str:
        """A slash command `response_url` that lands here (recorded as method `response_url`)."""
        return self.base_url.replace("/api/", f"/response/{name}")

    @property
    def base_url(self) -> str:
        """What to pass as `base_url` (trailing slash included, as slack_sdk expects)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/api/" if isinstance(host, str) else f"http://127.0.0.1:{port}/api/"

    def start(self) -> Self:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="slack-api-stand-in",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- scripting failures ----------------------------------------------------------------------

    def fail_next(self, method: str, *, error: str = "channel_not_found", times: int = 1) -> None:
        """The next `times` calls of `method` answer `{"ok": false, "error": error}`."""
        with self._lock:
            self._failures.setdefault(method, []).append(_Failure(error=error, remaining=times))

    def rate_limit_next(self, method: str, *, retry_after: int = 1, times: int = 1) -> None:
        """The next `times` calls of `method` answer HTTP 429 with `Retry-After`."""
        with self._lock:
            self._failures.setdefault(method, []).append(_Failure(retry_after=retry_after, remaining=times))

    def server_error_next(self, method: str, *, status: int = 503, times: int = 1) -> None:
        """The next `times` calls of `method` answer HTTP `status` (Slack having a bad moment)."""
        with self._lock:
            self._failures.setdefault(method, []).append(
                _Failure(status=status, error="service_unavailable", remaining=times)
            )

    # --- reading what happened -----------------------------------------------------------------

    @property
    def calls(self) -> list[RecordedCall]:
        """Every call so far, in arrival order."""
        with self._lock:
            return list(self._calls)

    def calls_to(self, method: str) -> list[RecordedCall]:
        """Calls of one method, in arrival order."""
        return [call for call in self.calls if call.method == method]

    def clear(self) -> None:
        """Forget recorded calls (failures stay scripted)."""
        with self._lock:
            self._calls.clear()

    def wait_for(self, predicate: Callable[[list[RecordedCall]], bool], *, timeout: float = 10.0) -> bool:
        """Block until `predicate(calls)` holds or `timeout` passes; returns whether it held."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate(list(self._calls)):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return True

    # --- answering -----------------------------------------------------------------------------

    def _record(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)
            self._lock.notify_all()

    def _scripted_failure(self, method: str) -> _Failure | None:
        with self._lock:
            queue = self._failures.get(method) or []
            if not queue:
                return None
            failure = queue[0]
            failure.remaining -= 1
            if failure.remaining <= 0:
                queue.pop(0)
            return failure

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.{next(self._ts):06d}"

    def answer(
        self, *, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Status, JSON body and extra headers for one Web API call."""
        self._record(RecordedCall(method=method, params=params, token=token, at=time.time()))
        failure = self._scripted_failure(method)
        if failure is not None and failure.status is not None:
            return failure.status, {"ok": False, "error": failure.error}, {}
        if failure is not None and failure.retry_after is not None:
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(failure.retry_after)}
        if failure is not None:
            return 200, {"ok": False, "error": failure.error}, {}
        if token is None:
            return 200, {"ok": False, "error": "not_authed"}, {}
        expected = self.app_token if method in APP_TOKEN_METHODS else self.token
        if token != expected:
            wrong_kind = token in (self.token, self.app_token)
            return 200, {"ok": False, "error": "not_allowed_token_type" if wrong_kind else "invalid_auth"}, {}
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        return 200, handler(params), {}

    def _m_auth_test(self, _params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://lab.slack.invalid/",
            "team": "Triage Lab",
            "user": "triage-bot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": "B0TRIAGEBOT",
            "is_enterprise_install": False,
        }

    def _m_apps_connections_open(self, _params: dict[str, Any]) -> dict[str, Any]:
        if self.socket_mode_url is None:
            return {"ok": False, "error": "access_denied"}
        return {"ok": True, "url": self.socket_mode_url()}

    def _require(self, params: dict[str, Any], *names: str) -> dict[str, Any] | None:
        for name in names:
            if not params.get(name):
                return {
                    "ok": False,
                    "error": "invalid_arguments",
                    "response_metadata": {"messages": [f"missing {name}"]},
                }
        return None

    def _message_check(self, params: dict[str, Any]) -> dict[str, Any] | None:
        if not params.get("text") and not params.get("blocks"):
            return {"ok": False, "error": "no_text"}
        return None

    def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "channel") or self._message_check(params)
        if problem:
            return problem
        ts = self._next_ts()
        message = {"type": "message", "user": BOT_USER_ID, "text": params.get("text", ""), "ts": ts}
        if params.get("thread_ts"):
            message["thread_ts"] = params["thread_ts"]
        return {"ok": True, "channel": params["channel"], "ts": ts, "message": message}

    def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "channel", "ts") or self._message_check(params)
        if problem:
            return problem
        return {"ok": True, "channel": params["channel"], "ts": params["ts"], "text": params.get("text", "")}

    def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "channel", "user") or self._message_check(params)
        return problem or {"ok": True, "message_ts": self._next_ts()}

    def _m_chat_getPermalink(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "channel", "message_ts")
        if problem:
            return problem
        ts = str(params["message_ts"]).replace(".", "")
        return {
            "ok": True,
            "channel": params["channel"],
            "permalink": f"https://lab.slack.invalid/archives/{params['channel']}/p{ts}",
        }

    def _m_views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "trigger_id", "view")
        if problem:
            return problem
        view = params["view"] if isinstance(params["view"], dict) else json.loads(params["view"])
        return {"ok": True, "view": {**view, "id": f"V{next(self._ts):08d}", "team_id": TEAM_ID}}

    def _m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "user")
        if problem:
            return problem
        user = str(params["user"])
        name = user.lower()
        return {
            "ok": True,
            "user": {
                "id": user,
                "team_id": TEAM_ID,
                "name": name,
                "real_name": f"Responder {user}",
                "tz": "Etc/UTC",
                "profile": {"display_name": name, "real_name": f"Responder {user}"},
            },
        }

    def _m_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "channel")
        if problem:
            return problem
        channel = str(params["channel"])
        return {
            "ok": True,
            "channel": {"id": channel, "name": f"incident-{channel.lower()}", "is_channel": True},
        }

    def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "filename", "length")
        if problem:
            return problem
        file_id = f"F{next(self._file_ids):08d}"
        return {
            "ok": True,
            "upload_url": self.base_url.replace("/api/", f"/upload/{file_id}"),
            "file_id": file_id,
        }

    def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        problem = self._require(params, "files")
        if problem:
            return problem
        files = params["files"] if isinstance(params["files"], list) else json.loads(params["files"])
        missing = [item["id"] for item in files if item.get("id") not in self.uploads]
        if missing:
            return {"ok": False, "error": "file_not_found", "file_ids": missing}
        return {"ok": True, "files": [{"id": item["id"], "title": item.get("title", "")} for item in files]}


def _parse_body(*, content_type: str, body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    if content_type.startswith("application/json"):
        parsed = json.loads(body.decode("utf-8"))
        return parsed if isinstance(parsed, dict) else {}
    pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True)
    return dict(pairs)


def _handler_for(stand_in: SlackApiStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: Any) -> None:  # quiet: tests read `calls` instead
            return

        def _send(
            self, status: int, body: bytes, *, content_type: str, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = urllib.parse.urlsplit(self.path).path
            if path.startswith("/upload/"):
                stand_in.uploads[path.rsplit("/", 1)[1]] = body
                self._send(200, f"OK - {len(body)}".encode(), content_type="text/plain")
                return
            if path.startswith("/response/"):
                params = _parse_body(content_type="application/json", body=body)
                stand_in._record(
                    RecordedCall(method="response_url", params=params, token=None, at=time.time())
                )
                self._send(200, b"ok", content_type="text/plain")
                return
            if not path.startswith("/api/"):
                self._send(404, b"not found", content_type="text/plain")
                return
            params = _parse_body(content_type=self.headers.get("Content-Type", ""), body=body)
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            auth = self.headers.get("Authorization", "")
            token = (
                auth.removeprefix("Bearer ").strip() or params.pop("token", None) or query.pop("token", None)
            )
            status, payload, headers = stand_in.answer(
                method=path[len("/api/") :], params={**query, **params}, token=token
            )
            self._send(
                status,
                json.dumps(payload).encode(),
                content_type="application/json; charset=utf-8",
                headers=headers,
            )

        do_GET = do_POST

    return Handler
