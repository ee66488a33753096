"""A local stand-in for Slack's Socket Mode: a WebSocket server on 127.0.0.1 (the `websockets` library) that
the Web API stand-in's `apps.connections.open` points at, so the production client connects to it as to Slack.

What it does, as Slack does (https://docs.slack.dev/apis/events-api/using-socket-mode/):
- `apps.connections.open` (app-level token) hands out `ws://127.0.0.1:<port>/link/?ticket=...&app_id=...`;
  a ticket opens one connection, so every (re)connection costs a fresh call;
- each connection starts with `{"type": "hello", ...}`; pings are answered with pongs (the library does it);
- envelopes `{"envelope_id", "type": "slash_commands" | "interactive", "payload", "accepts_response_payload"}`
  go to the newest connection and wait for an ack `{"envelope_id": ..., "payload"?: ...}`, Slack's 3 seconds;
- an envelope not acked when its connection goes away is delivered again on the next connection;
- `refresh()` sends `{"type": "disconnect", "reason": "refresh_requested" | "warning"}` and closes the old
  connection once the client has opened a new one; `drop()` closes a connection without warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Any, Self

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from bot.lab.slack_api import SlackApiStandIn
from handlers.slack.app import SlackBot
from handlers.slack.services import Services
from tests.support.slack import slash_fields

APP_ID = "A0TRIAGE"
ACK_DEADLINE_SECONDS = 3.0  # Slack shows the user an error when a command is not acked in time
# Slack's grace between `disconnect: refresh_requested` and closing the old connection is a few seconds;
# here the old connection closes as soon as the client is back (or after this long, whichever is first).
REFRESH_GRACE_SECONDS = 10.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Envelope:
    """One delivery unit: what Slack sends over the socket."""

    envelope_id: str
    type: str
    payload: dict[str, Any]
    accepts_response_payload: bool

    def message(self) -> str:
        """The JSON text frame."""
        return json.dumps(
            {
                "envelope_id": self.envelope_id,
                "type": self.type,
                "payload": self.payload,
                "accepts_response_payload": self.accepts_response_payload,
            }
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Delivery:
    """An envelope written to one connection."""

    envelope_id: str
    connection: int
    at: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ack:
    """An acknowledgement that reached the stand-in."""

    envelope_id: str
    payload: dict[str, Any] | None
    connection: int
    latency: float  # since the envelope's latest delivery: what the app is answerable for
    waited: float  # since the envelope was first sent: what the person who typed the command waited

    @property
    def in_time(self) -> bool:
        """Within Slack's 3 seconds of the delivery."""
        return self.latency <= ACK_DEADLINE_SECONDS


@dataclasses.dataclass(kw_only=True)
class Connection:
    """One WebSocket connection the app opened."""

    number: int
    ticket: str
    socket: ServerConnection
    opened_at: float
    closed_at: float | None = None


class SocketModeStandIn:
    """Attach to a Web API stand-in, `start()`, let the app connect, `send_*`, read `acks`; `stop()` when done."""

    def __init__(self, *, web_api: SlackApiStandIn, host: str = "127.0.0.1") -> None:
        self.web_api = web_api
        self._host = host
        self._lock = threading.Condition()
        self._ticket_numbers = itertools.count(1)
        self._tickets: dict[str, bool] = {}  # ticket -> used
        self._connections: list[Connection] = []
        self._envelopes: dict[str, Envelope] = {}
        self._sent_at: dict[str, float] = {}
        self._unacked: dict[str, Delivery | None] = {}  # None: waiting for a connection
        self._deliveries: list[Delivery] = []
        self._lose_first_ack: set[str] = set()
        self.lost_acks: list[str] = []  # envelope ids whose ack was dropped on purpose
        self._acks: list[Ack] = []
        self.protocol_errors: list[str] = []
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        """Listen on an ephemeral loopback port and answer `apps.connections.open` with it."""
        self._server = serve(
            self._serve_connection,
            self._host,
            0,
            process_request=self._check_ticket,
            ping_interval=20,  # Slack pings too; the client must pong
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="socket-mode-stand-in", daemon=True)
        self._thread.start()
        self.web_api.socket_mode_url = self.issue_url
        return self

    def stop(self) -> None:
        """Close every connection and the listening socket."""
        self.web_api.socket_mode_url = None
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The listening port."""
        assert self._server is not None, "start() first"
        return int(self._server.socket.getsockname()[1])

    def issue_url(self) -> str:
        """A one-connection URL, as `apps.connections.open` returns (`wss://.../link/?ticket=...`)."""
        ticket = f"{next(self._ticket_numbers):04d}-{uuid.uuid4().hex[:12]}"
        with self._lock:
            self._tickets[ticket] = False
        return f"ws://{self._host}:{self.port}/link/?ticket={ticket}&app_id={APP_ID}"

    # --- the server side ---------------------------------------------------------------------------

    def _check_ticket(self, connection: ServerConnection, request: Request) -> Response | None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.path).query)
        ticket = (query.get("ticket") or [""])[0]
        with self._lock:
            if self._tickets.get(ticket) is not False:
                self.protocol_errors.append(f"connection with an unknown or used ticket {ticket!r}")
                return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid ticket\n")
            self._tickets[ticket] = True
        connection.ticket = ticket  # type: ignore[attr-defined]
        return None

    def _serve_connection(self, websocket: ServerConnection) -> None:
        with self._lock:
            record = Connection(
                number=len(self._connections) + 1,
                ticket=getattr(websocket, "ticket", ""),
                socket=websocket,
                opened_at=time.monotonic(),
            )
            websocket.send(self._hello(connections=1 + sum(c.closed_at is None for c in self._connections)))
            self._connections.append(record)
            waiting = [envelope_id for envelope_id, delivery in self._unacked.items() if delivery is None]
            for envelope_id in waiting:  # sent while no connection was up, or lost with a closed one
                self._deliver(self._envelopes[envelope_id], record)
            self._lock.notify_all()
        try:
            for message in websocket:
                self._receive(record, message)
        except ConnectionClosed:
            pass
        finally:
            self._closed(record)

    def _hello(self, *, connections: int) -> str:
        return json.dumps(
            {
                "type": "hello",
                "num_connections": connections,
                "debug_info": {"host": "applink-stand-in", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
        )

    def _receive(self, record: Connection, message: str | bytes) -> None:
        try:
            parsed = json.loads(message)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("envelope_id"), str):
            with self._lock:
                self.protocol_errors.append(f"not an ack: {message!r:.200}")
            return
        envelope_id = parsed["envelope_id"]
        payload = parsed.get("payload")
        with self._lock:
            envelope = self._envelopes.get(envelope_id)
            if envelope is None:
                self.protocol_errors.append(f"ack for an envelope never sent: {envelope_id}")
                return
            if envelope_id in self._lose_first_ack:  # the connection "died" before this ack reached Slack
                self._lose_first_ack.discard(envelope_id)
                self.lost_acks.append(envelope_id)
                self._lock.notify_all()
                return
            if payload is not None and not envelope.accepts_response_payload:
                self.protocol_errors.append(f"payload in the ack of {envelope.type} {envelope_id}")
            delivery = self._unacked.pop(envelope_id, None) or self._last_delivery(envelope_id)
            now = time.monotonic()
            self._acks.append(
                Ack(
                    envelope_id=envelope_id,
                    payload=payload if isinstance(payload, dict) else None,
                    connection=record.number,
                    latency=now - delivery.at,
                    waited=now - self._sent_at[envelope_id],
                )
            )
            self._lock.notify_all()

    def _last_delivery(self, envelope_id: str) -> Delivery:
        return next(item for item in reversed(self._deliveries) if item.envelope_id == envelope_id)

    def _closed(self, record: Connection) -> None:
        with self._lock:
            record.closed_at = time.monotonic()
            lost = [
                envelope_id
                for envelope_id, delivery in self._unacked.items()
                if delivery is not None and delivery.connection == record.number
            ]
            live = self._live()
            for envelope_id in lost:  # Slack delivers what was not acked again, on a connection still up
                self._unacked[envelope_id] = None
                if live is not None:
                    self._deliver(self._envelopes[envelope_id], live)
            self._lock.notify_all()

    def _live(self) -> Connection | None:
        open_ = [item for item in self._connections if item.closed_at is None]
        return open_[-1] if open_ else None

    def _deliver(self, envelope: Envelope, record: Connection) -> None:
        """Write one envelope to a connection (called with the lock held)."""
        delivery = Delivery(envelope_id=envelope.envelope_id, connection=record.number, at=time.monotonic())
        try:
            record.socket.send(envelope.message())
        except ConnectionClosed:
            self._unacked[envelope.envelope_id] = None  # the next connection gets it
            return
        self._unacked[envelope.envelope_id] = delivery
        self._deliveries.append(delivery)

    # --- what a test does ----------------------------------------------------------------------

    def send(
        self, *, type: str, payload: dict[str, Any], accepts_response_payload: bool, lose_ack: bool = False
    ) -> Envelope:
        """Deliver one envelope on the newest connection (or hold it until one is up); with `lose_ack`, the
        app's first ack of it never reaches Slack (its connection died first), so it stays unacked."""
        envelope = Envelope(
            envelope_id=str(uuid.uuid4()),
            type=type,
            payload=payload,
            accepts_response_payload=accepts_response_payload,
        )
        with self._lock:
            self._envelopes[envelope.envelope_id] = envelope
            self._sent_at[envelope.envelope_id] = time.monotonic()
            self._unacked[envelope.envelope_id] = None
            if lose_ack:
                self._lose_first_ack.add(envelope.envelope_id)
            live = self._live()
            if live is not None:
                self._deliver(envelope, live)
        return envelope

    def slash_command(self, fields: dict[str, str], *, lose_ack: bool = False) -> Envelope:
        """`/triage ...` as Slack sends it over the socket: the form fields as a JSON object."""
        return self.send(type="slash_commands", payload=dict(fields), accepts_response_payload=True, lose_ack=lose_ack)

    def interactive(self, payload: dict[str, Any]) -> Envelope:
        """A button click (`block_actions`) or a modal submission (`view_submission`)."""
        accepts = payload.get("type") in ("view_submission", "block_suggestion")
        return self.send(type="interactive", payload=payload, accepts_response_payload=accepts)

    def refresh(self, *, reason: str = "refresh_requested") -> Connection:
        """Ask the app to reconnect, as Slack does before it recycles a connection; the old one closes once
        the app is connected again (or after a grace period). Returns the connection being replaced."""
        with self._lock:
            old = self._live()
            assert old is not None, "no connection to refresh"
            count = len(self._connections)
        old.socket.send(json.dumps({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-stand-in"}}))

        def close_when_replaced() -> None:
            self.wait_for_connections(count + 1, timeout=REFRESH_GRACE_SECONDS)
            old.socket.close()

        threading.Thread(target=close_when_replaced, name="socket-mode-refresh", daemon=True).start()
        return old

    def drop(self, *, abrupt: bool = False) -> Connection:
        """Close the newest connection: with a close frame (going away), or `abrupt`ly (TCP reset, no frame)."""
        with self._lock:
            live = self._live()
            assert live is not None, "no connection to drop"
        if abrupt:
            raw = live.socket.socket
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            raw.shutdown(socket.SHUT_RDWR)
        else:
            live.socket.close(code=1001, reason="going away")
        return live

    # --- reading what happened -------------------------------------------------------------------

    @property
    def tickets_issued(self) -> int:
        """How many URLs `apps.connections.open` handed out."""
        with self._lock:
            return len(self._tickets)

    @property
    def connections(self) -> list[Connection]:
        """Every connection so far, oldest first."""
        with self._lock:
            return list(self._connections)

    @property
    def acks(self) -> list[Ack]:
        """Every ack that reached the stand-in, in arrival order."""
        with self._lock:
            return list(self._acks)

    def deliveries_of(self, envelope: Envelope) -> list[Delivery]:
        """Each time the envelope was written to a connection."""
        with self._lock:
            return [item for item in self._deliveries if item.envelope_id == envelope.envelope_id]

    def unacked(self) -> list[str]:
        """Envelope ids still waiting for an ack."""
        with self._lock:
            return list(self._unacked)

    def wait(self, predicate: Callable[[], bool], *, timeout: float) -> bool:
        """Block until `predicate()` holds (checked whenever something arrives) or `timeout` passes."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.2))
            return True

    def wait_for_connections(self, count: int, *, timeout: float = 10.0) -> bool:
        """Until `count` connections have been opened and greeted."""
        return self.wait(lambda: len(self._connections) >= count, timeout=timeout)

    def wait_for_ack(self, envelope: Envelope, *, timeout: float = 10.0) -> Ack:
        """The first ack of this envelope; fails the test when none comes in `timeout`."""

        def acked() -> bool:
            return any(item.envelope_id == envelope.envelope_id for item in self._acks)

        assert self.wait(acked, timeout=timeout), f"{envelope.type} {envelope.envelope_id} was not acked"
        return next(item for item in self.acks if item.envelope_id == envelope.envelope_id)



@dataclasses.dataclass(kw_only=True)
class SocketBotUnderTest:
    """The bot connected over Socket Mode (the production `connect_socket_mode`) to the stand-ins."""

    socket: SocketModeStandIn
    slack: SlackApiStandIn
    services: Services
    bot: SlackBot

    def command(self, text: str, **fields: Any) -> Ack:
        """Send `/triage <text>` as an envelope; return its ack once the work it started is done."""
        fields.setdefault("response_url", self.slack.response_url())
        ack = self.socket.wait_for_ack(self.socket.slash_command(slash_fields(text=text, **fields)))
        assert self.services.work.wait_idle(timeout=30), "lazy work did not finish"
        return ack

    def interact(self, payload: dict[str, Any]) -> Ack:
        """Send a click or a modal submission; return its ack once the work it started is done."""
        ack = self.socket.wait_for_ack(self.socket.interactive(payload))
        assert self.services.work.wait_idle(timeout=30), "lazy work did not finish"
        return ack


@contextlib.contextmanager
def socket_serving(bot: SlackBot, *, slack: SlackApiStandIn) -> Iterator[SocketBotUnderTest]:
    """The bot connected out to the Socket Mode stand-in as `serve` connects it; closed (work drained) after."""
    from handlers.slack.serve import connect_socket_mode

    with SocketModeStandIn(web_api=slack) as socket_mode:
        close = connect_socket_mode(bot=bot, app_token=slack.app_token)
        try:
            assert socket_mode.wait_for_connections(1), "the app did not connect"
            slack.clear()
            yield SocketBotUnderTest(socket=socket_mode, slack=slack, services=bot.services, bot=bot)
        finally:
            bot.services.work.wait_idle(timeout=30)
            # close() stops reconnecting at once, then waits (up to the client's 3 s read timeout) for the
            # blocking read to end; the stand-in closing its side ends that read now.
            closing = threading.Thread(target=close, name="socket-mode-close", daemon=True)
            closing.start()
            closing.join(timeout=0.05)
            socket_mode.stop()
            closing.join(timeout=10)
            bot.close()
