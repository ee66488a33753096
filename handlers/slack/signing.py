"""Slack's request signature (v0 HMAC-SHA256 over `v0:<timestamp>:<body>`), for the demo's requests."""

from __future__ import annotations

import hashlib
import hmac
import time


def signature_headers(*, body: str, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """`X-Slack-Request-Timestamp` and `X-Slack-Signature` exactly as Slack computes them."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}
