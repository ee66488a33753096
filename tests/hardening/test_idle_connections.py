"""Idle and stalled clients cannot take `serve` offline: with 110 sockets held open (connected and silent, or
stuck half-way through their headers) health checks and signed commands still answer, and the server closes
such sockets once they have been idle for its timeout."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest
import requests

from handlers.ops import server as http_server
from handlers.slack.app import http_app
from tests.support.slack import BotUnderTest, make_bot

HELD = 110
ANSWER_WITHIN = 3.0  # seconds: a functional promise (Slack drops a command not acked in 3 s), not a benchmark


@contextlib.contextmanager
def held_sockets(url: str, *, count: int, first_bytes: bytes = b"") -> Iterator[list[socket.socket]]:
    host, port = url.removeprefix("http://").split(":")
    opened = []
    try:
        for _ in range(count):
            sock = socket.create_connection((host, int(port)), timeout=5)
            if first_bytes:
                sock.sendall(first_bytes)
            opened.append(sock)
        time.sleep(0.5)  # let the server accept them all
        yield opened
    finally:
        for sock in opened:
            sock.close()


def _timed(call) -> tuple[float, requests.Response]:
    started = time.monotonic()
    response = call()
    return time.monotonic() - started, response


@pytest.mark.parametrize(
    "first_bytes",
    [b"", b"POST /slack/events HTTP/1.1\r\nHost: bot\r\nContent-Length: 100\r\n"],
    ids=["silent", "stalled-in-headers"],
)
def test_health_and_signed_commands_answer_with_110_sockets_held(bot: BotUnderTest, first_bytes: bytes) -> None:
    with held_sockets(bot.server.url, count=HELD, first_bytes=first_bytes):
        health_s, health = _timed(lambda: requests.get(f"{bot.server.url}/healthz", timeout=ANSWER_WITHIN))
        command_s, command = _timed(lambda: bot.command("help", user_id="U0ALICE"))
    assert health.status_code == 200 and health_s < ANSWER_WITHIN
    assert command.status_code == 200 and command_s < ANSWER_WITHIN
    print(f"{HELD} held ({'stalled' if first_bytes else 'silent'}): /healthz {health_s * 1000:.0f} ms, "
          f"signed command {command_s * 1000:.0f} ms")


def test_an_idle_or_stalled_socket_is_closed_after_the_idle_timeout(slack_stand_in, bot_database_url) -> None:
    built = make_bot(database_url=bot_database_url, slack=slack_stand_in, diagnoser=None)
    limits = http_server.ServerLimits(idle_timeout_seconds=1)
    running = http_server.start_in_thread(wsgi_app=http_app(built), limits=limits)
    try:
        with held_sockets(running.url, count=2, first_bytes=b"GET /healthz HTTP/1.1\r\n") as (stalled, _other):
            stalled.settimeout(15)
            started = time.monotonic()
            assert stalled.recv(1024) == b""  # the server hung up
            closed_after = time.monotonic() - started
        assert closed_after < 10
        print(f"stalled socket closed after {closed_after:.1f} s (idle timeout 1 s)")
    finally:
        running.stop()
        built.close()


def test_the_limits_come_from_the_settings(bot: BotUnderTest) -> None:
    settings = bot.services.settings.model_copy(
        update={"http_connection_limit": 2000, "http_idle_timeout_seconds": 30, "http_threads": 4}
    )
    limits = http_server.ServerLimits.from_settings(settings)
    assert (limits.connection_limit, limits.idle_timeout_seconds, limits.threads) == (2000, 30, 4)
