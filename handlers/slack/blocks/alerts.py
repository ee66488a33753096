"""Block Kit for alerts: their details in an incident's thread, linked storms, resolution. Alert labels and
annotations are untrusted text: escaped, de-mentioned and clipped here; links only when http(s)."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from bot import markup
from bot.alerts.intake import AlertView, alertmanager_link
from bot.evidence.findings import _plain
from handlers.slack.blocks import common as blocks

MAX_ALERTS_SHOWN = 5
MAX_ANNOTATION_CHARS = 600
SHOWN_LABELS = ("severity", "namespace", "pod", "job_name", "node", "Hostname", "gpu", "UUID", "modelName", "instance")


def _link(url: str, label: str) -> markup.Mrkdwn:
    """`label: <url>` for http(s) URLs only, the URL as inert text (Slack links it as typed, so no alert can
    dress a link up under another name); nothing for other schemes."""
    if not url.startswith(("http://", "https://")):
        return markup.Mrkdwn("")
    return markup.format("{}: {}", label, url)


def plain(text: str, *, limit: int = 150) -> markup.Mrkdwn:
    """Untrusted alert text (a label, the receiver) made inert for a message's text, on one line."""
    return markup.escape(markup.clip(" ".join(text.split()), limit=limit))


def names(alerts: Sequence[AlertView]) -> markup.Mrkdwn:
    """`Name` ×n, most frequent first (escaped)."""
    counts = collections.Counter(alert.name for alert in alerts)
    shown = markup.join(", ", (
        markup.format("`{}`{}", name[:80], f" ×{count}" if count > 1 else "") for name, count in counts.most_common(8)
    ))
    return shown + (markup.format(" and {} more", len(counts) - 8) if len(counts) > 8 else markup.Mrkdwn(""))


def _one(alert: AlertView, *, external_url: str) -> markup.Mrkdwn:
    lines = [markup.format("*{}* · {} since {}", alert.name[:150], alert.status, _plain(alert.starts_at))]
    labels = [f"{key}={alert.labels[key][:120]}" for key in SHOWN_LABELS if alert.labels.get(key)]
    if labels:
        lines.append(markup.format("`{}`", "  ".join(labels)))
    for name, text in sorted(alert.annotations.items()):
        value = markup.clip(" ".join(text.split()), limit=MAX_ANNOTATION_CHARS)
        lines.append(markup.format("*{}:* {}", name[:60], value))
    links = [item for item in (_link(alert.generator_url, "source graph"),
                               _link(alertmanager_link(external_url=external_url, alert=alert), "in Alertmanager"))
             if item]
    if links:
        lines.append(markup.join(" · ", links))
    return markup.join("\n", lines)


def alert_details(*, alerts: Sequence[AlertView], external_url: str, gpu: dict[str, str]) -> list[dict[str, Any]]:
    """The alerts that opened the incident: name, labels that locate it, every annotation, links back."""
    gpu_line = markup.format(" · GPU {}", ", ".join(f"{key}={value[:60]}" for key, value in gpu.items())) if gpu else ""
    out = [blocks.section(markup.format(":rotating_light: Opened from {} alert(s): {}{}", len(alerts), names(alerts),
                                        gpu_line))]
    out += [blocks.section(_one(alert, external_url=external_url)) for alert in alerts[:MAX_ALERTS_SHOWN]]
    if len(alerts) > MAX_ALERTS_SHOWN:
        out.append(blocks.context(markup.format("+{} more alert(s) for this target are on the incident's timeline",
                                                len(alerts) - MAX_ALERTS_SHOWN)))
    return out


def linked(*, alerts: Sequence[AlertView], incident_key: str, external_url: str) -> list[dict[str, Any]]:
    """One reply per notification for alerts joining an open incident (never one per alert)."""
    out = [blocks.section(markup.format(":rotating_light: {} more firing alert(s) linked to *{}*: {}",
                                        len(alerts), incident_key, names(alerts)))]
    out.append(blocks.section(_one(alerts[0], external_url=external_url)))
    return out


def suggest_resolving(*, incident_key: str, total: int) -> list[dict[str, Any]]:
    """Every alert resolved: suggest resolving, never resolve (the failure may still reproduce)."""
    return [blocks.section(markup.format(
        ":white_check_mark: Every alert of *{}* has resolved ({}). If the original failure no longer reproduces, the "
        "commander resolves it: `/triage resolve {} <remediation>` (or `/triage snapshot {}` first to check).",
        incident_key, total, incident_key, incident_key))]
