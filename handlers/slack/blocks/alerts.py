"""Block Kit for alerts: their details in an incident's thread, linked storms, resolution. Alert labels and
annotations are untrusted text: escaped, de-mentioned and clipped here; links only when http(s)."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from bot.alerts.intake import AlertView, alertmanager_link
from bot.evidence.findings import _plain
from handlers.slack.blocks import common as blocks

MAX_ALERTS_SHOWN = 5
MAX_ANNOTATION_CHARS = 600
SHOWN_LABELS = ("severity", "namespace", "pod", "job_name", "node", "Hostname", "gpu", "UUID", "modelName", "instance")


def _escape(text: str) -> str:
    return blocks.quiet(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def _link(url: str, label: str) -> str:
    """`<url|label>` for http(s) URLs only; Slack's link syntax cannot be broken out of (| and > escaped)."""
    if not url.startswith(("http://", "https://")):
        return ""
    safe = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    return f"<{safe}|{label}>"


def plain(text: str, *, limit: int = 150) -> str:
    """Untrusted alert text (a label, the receiver) made safe for a message's text."""
    return blocks.clip(_escape(" ".join(text.split())).replace("`", "'"), limit=limit)


def names(alerts: Sequence[AlertView]) -> str:
    """`Name` ×n, most frequent first (escaped)."""
    counts = collections.Counter(alert.name for alert in alerts)
    shown = ", ".join(f"`{_escape(name)[:80]}`" + (f" ×{count}" if count > 1 else "")
                      for name, count in counts.most_common(8))
    return shown + (f" and {len(counts) - 8} more" if len(counts) > 8 else "")


def _one(alert: AlertView, *, external_url: str) -> str:
    lines = [f"*{_escape(alert.name)[:150]}* · {alert.status} since {_plain(alert.starts_at)}"]
    labels = [f"{key}={_escape(alert.labels[key])[:120]}" for key in SHOWN_LABELS if alert.labels.get(key)]
    if labels:
        lines.append("`" + "  ".join(labels).replace("`", "'") + "`")
    for name, text in sorted(alert.annotations.items()):
        value = _escape(" ".join(text.split()))
        if name.endswith("_url") or name == "runbook":
            value = _link(text, name) or value
        lines.append(f"*{_escape(name)[:60]}:* {blocks.clip(value, limit=MAX_ANNOTATION_CHARS)}")
    links = [item for item in (_link(alert.generator_url, "source graph"),
                               _link(alertmanager_link(external_url=external_url, alert=alert), "in Alertmanager"))
             if item]
    if links:
        lines.append(" · ".join(links))
    return "\n".join(lines)


def alert_details(*, alerts: Sequence[AlertView], external_url: str, gpu: dict[str, str]) -> list[dict[str, Any]]:
    """The alerts that opened the incident: name, labels that locate it, every annotation, links back."""
    out = [blocks.section(f":rotating_light: Opened from {len(alerts)} alert(s): {names(alerts)}"
                          + (" · GPU " + ", ".join(f"{key}={_escape(value)[:60]}" for key, value in gpu.items())
                             if gpu else ""))]
    out += [blocks.section(_one(alert, external_url=external_url)) for alert in alerts[:MAX_ALERTS_SHOWN]]
    if len(alerts) > MAX_ALERTS_SHOWN:
        out.append(blocks.context(f"+{len(alerts) - MAX_ALERTS_SHOWN} more alert(s) for this target are on the "
                                  "incident's timeline"))
    return out


def linked(*, alerts: Sequence[AlertView], incident_key: str, external_url: str) -> list[dict[str, Any]]:
    """One reply per notification for alerts joining an open incident (never one per alert)."""
    out = [blocks.section(f":rotating_light: {len(alerts)} more firing alert(s) linked to *{incident_key}*: "
                          f"{names(alerts)}")]
    out.append(blocks.section(_one(alerts[0], external_url=external_url)))
    return out


def suggest_resolving(*, incident_key: str, total: int) -> list[dict[str, Any]]:
    """Every alert resolved: suggest resolving, never resolve (the failure may still reproduce)."""
    return [blocks.section(
        f":white_check_mark: Every alert of *{incident_key}* has resolved ({total}). If the original failure no "
        f"longer reproduces, the commander resolves it: `/triage resolve {incident_key} <remediation>` "
        f"(or `/triage snapshot {incident_key}` first to check).")]
