"""Redact collected evidence before it is stored or posted, so a snapshot never leaks a credential.

Evidence comes from pod specs, events, logs and scontrol output; any of them can carry a token.
Two layers work together, both listed in the catalogue (`bot/evidence/detectors.py`):

- detectors that recognise a secret by its shape wherever it appears (Slack/GitHub/GitLab/Hugging Face/
  NGC tokens, AWS and GCP keys, JWTs, PEM private keys, passwords in URLs, bearer headers) or by the
  command line it is given on (`mysql -p...`, `sshpass -p`, `redis-cli -a`, `docker login -p`, netrc);
- name rules that recognise a secret by the name it is stored under (`DB_PASSWORD=...`, `PGPASSWORD=...`,
  `"api_key": "..."`, `- name: HF_TOKEN / value: ...`, `client-key-data:`, environment dicts).

Every function is pure and idempotent: redacting twice gives the same text as redacting once.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import Any

from bot.evidence import detectors, findings, report

REDACTED = detectors.REDACTED

# --- Secrets recognised by their shape: the catalogue (bot/evidence/detectors.py) ----------------------------

# PEM private keys: the whole block; a block cut short by the evidence byte cap is redacted to the end.
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK|)-----"
    r"(?:.*?-----END \1PRIVATE KEY\2-----|.*\Z)",
    re.DOTALL,
)
# AWS secret access keys have no prefix: 40 base64 characters; we require mixed case and a digit so
# git SHAs (lowercase hex) and ordinary words are left alone.
_BARE_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
# Userinfo in URLs: scheme://user:password@host (user may be empty, as in redis://:pw@host).
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]{0,20}://[^\s:/@]*:)([^\s@/]+)(@)")
# Authorization headers, in raw, JSON or curl form: keep the scheme, drop the credential.
_AUTHORIZATION = re.compile(
    r"""((?:proxy-)?authorization["']?\s*[:=]\s*["']?)"""
    r"(?:(bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+)?"
    r"""(?!\[REDACTED\])[^\s"',;]+(?:[^\r\n"']*)""",
    re.IGNORECASE,
)
_BARE_BEARER = re.compile(r"\b(bearer\s+)([A-Za-z0-9._~+/-]{12,}=*)", re.IGNORECASE)
_COOKIE = re.compile(r"(?im)^(\s*(?:set-)?cookie\s*:\s*)(?!\[REDACTED\]).+$")

# --- Secrets recognised by the name they are stored under ----------------------------------------

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEGMENT_SPLIT = re.compile(r"[^A-Za-z0-9]+")

# `name=value` / `name="value"` (env, query strings, CLI), `name: value` / `"name": "value"` (YAML,
# JSON, headers, `kubectl describe`), and `--name value` (command lines). Only the name and separator
# are matched by a search (a name starts where no name character precedes it, so each is scanned once);
# the value is measured afterwards, and only for secret names, so scanning stays linear however hostile
# the text.
_NAME = r"(?<![A-Za-z0-9_.-])(-{0,2}[A-Za-z_][A-Za-z0-9_.-]{0,100})"
# A quoted value ends at its closing quote, or at the end of the line when the evidence cap cut it.
_QUOTED = r""""(?:[^"\\\r\n]|\\.)*+(?:"|(?=[\r\n])|\Z)|'[^'\r\n]*+(?:'|(?=[\r\n])|\Z)"""
_KEY_ASSIGN = re.compile(_NAME + r"""(["']?[ \t]*([:=])[ \t]*)""")
# Starts with the literal `--` (fast prefix search); the lookbehind after it keeps `a--b` out.
_FLAG_SPACE = re.compile(r"(--(?<![A-Za-z0-9_.-]--)[A-Za-z_][A-Za-z0-9_.-]{0,100})([ \t]+)(?=[^\s-])")
_VALUE_AFTER_EQUALS = re.compile(_QUOTED + r"""|[^\s,;&"'<>{}\[\]()]++""")
_VALUE_AFTER_COLON = re.compile(_QUOTED + r"""|[^\s,"'{}\[\]][^\r\n,"'{}]*+""")
_VALUE_AFTER_FLAG = re.compile(r"\S++")
_VALUE_AFTER = {"=": _VALUE_AFTER_EQUALS, ":": _VALUE_AFTER_COLON, "": _VALUE_AFTER_FLAG}
# Kubernetes env entries: {"name": "DB_PASSWORD", "value": "..."} and its YAML twin.
_ENV_ENTRY_JSON = re.compile(
    r""""name"\s*:\s*"([A-Za-z_][A-Za-z0-9_.-]{0,100})"\s*,\s*"value"\s*:\s*(""" + _QUOTED + ")"
)
_ENV_ENTRY_YAML = re.compile(
    r"""\bname:\s*["']?([A-Za-z_][A-Za-z0-9_.-]{0,100})["']?[ \t]*\r?\n[ \t]*value:[ \t]*([^\r\n]+)"""
)


def _segments(name: str) -> list[str]:
    """Split `apiKey`, `API_KEY`, `api-key`, `x.api.key` into lowercase words."""
    spaced = _CAMEL_BOUNDARY.sub("_", name.strip("-"))
    return [part.lower() for part in _SEGMENT_SPLIT.split(spaced) if part]


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a field, flag or variable called `name` probably holds a credential (the catalogue's words)."""
    words = _segments(name)
    if not words or words[-1] in detectors.METADATA_SEGMENTS:
        return False
    joined = "_".join(words)
    if any(part in joined for part in detectors.SECRET_NAME_PARTS):
        return True
    if any(word in detectors.ALWAYS_SECRET_SEGMENTS for word in words):
        return True
    if any(glued in word for word in words for glued in detectors.GLUED_SECRET_WORDS):
        return True  # PGPASSWORD, dbpassword, SECRETKEY
    if words == ["key"]:
        return False  # tolerations, secretKeyRef and label selectors all have a plain `key:`
    last = words[-1]
    return (
        last in detectors.TRAILING_SECRET_SEGMENTS
        or last in detectors.GLUED_SECRET_KEYS
        or last.endswith(detectors.GLUED_SECRET_SUFFIXES)
    )


def is_secret_env_name(name: str) -> bool:
    """Environment variables: any name containing TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL..."""
    upper = name.upper()
    if upper in detectors.INNOCUOUS_ENV_NAMES:
        return False
    return is_secret_name(name) or any(word in upper for word in detectors.ENV_SECRET_WORDS)


def _is_already_redacted(value: str) -> bool:
    return value.strip("\"' ").startswith(REDACTED)


def _quoted_like(value: str) -> str:
    """Replace a value, keeping the quotes it came in so JSON and YAML stay well-formed."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return f"{value[0]}{REDACTED}{value[0]}"
    return REDACTED


def _redact_by_name(pattern: re.Pattern[str], text: str) -> str:
    """Replace the values of secret-named keys; after any other key, keep scanning right after it.

    Resuming after the separator (not after the value) means `env: DB_PASSWORD=x` and
    `a=password=x` are still seen, and every character is looked at a bounded number of times.
    """
    pieces: list[str] = []
    position = 0
    while (head := pattern.search(text, position)) is not None:
        separator = head.group(3) if pattern.groups >= 3 else ""
        value = _VALUE_AFTER[separator].match(text, head.end()) if is_secret_name(head.group(1)) else None
        pieces.append(text[position : head.end()])
        position = head.end()
        if value is None or not value.group(0):
            continue
        if _is_already_redacted(value.group(0)) or value.group(0) in ('""', "''"):
            continue
        pieces.append(_quoted_like(value.group(0)))
        position = value.end()
    pieces.append(text[position:])
    return "".join(pieces)


def _redact_names(text: str) -> str:
    """The name rules alone: `name=value` and `name: value`, then `--name value`."""
    for pattern in (_KEY_ASSIGN, _FLAG_SPACE):
        text = _redact_by_name(pattern, text)
    return text


def _replace_env_entry(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    if not is_secret_env_name(name) or _is_already_redacted(value):
        return match.group(0)
    start, end = match.span(2)
    offset = match.start(0)
    whole = match.group(0)
    return whole[: start - offset] + _quoted_like(value.strip()) + whole[end - offset :]


def _replace_bare_aws_secret(match: re.Match[str]) -> str:
    value = match.group(0)
    has_mix = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return REDACTED if has_mix and any(c.isdigit() for c in value) else value


def _replace_bare_bearer(match: re.Match[str]) -> str:
    token = match.group(2)
    looks_like_credential = any(c.isdigit() for c in token) or len(token) >= 24
    return f"{match.group(1)}{REDACTED}" if looks_like_credential else match.group(0)


def _replace_authorization(match: re.Match[str]) -> str:
    if REDACTED in match.group(0):
        return match.group(0)
    scheme = f"{match.group(2)} " if match.group(2) else ""
    return f"{match.group(1)}{scheme}{REDACTED}"


def _replace_detected(match: re.Match[str]) -> str:
    """The whole match, or only its `secret` group, as REDACTED (the context stays for the responder)."""
    if "secret" not in match.re.groupindex or match.start("secret") < 0:
        return REDACTED
    start, end = match.span("secret")
    whole = match.group(0)
    offset = match.start(0)
    return whole[: start - offset] + REDACTED + whole[end - offset :]


def _catalogue(text: str, lowered: str) -> str:
    """Every catalogue detector whose literal hint occurs in the text."""
    for detector in detectors.CATALOGUE:
        haystack = lowered if detector.lower_hints else text
        if not detector.hints or any(hint in haystack for hint in detector.hints):
            text = detector.pattern.sub(_replace_detected, text)
    return text


def redact_text(text: str) -> str:
    """Free text (log lines, command output, JSON, YAML) with every recognised secret replaced."""
    if not text:
        return text
    lowered = text.lower()
    out = _PEM_PRIVATE_KEY.sub(REDACTED, text) if "private key" in lowered else text
    if "authorization" in lowered:
        out = _AUTHORIZATION.sub(_replace_authorization, out)
    if "cookie" in lowered:
        out = _COOKIE.sub(lambda m: f"{m.group(1)}{REDACTED}", out)
    if "bearer" in lowered:
        out = _BARE_BEARER.sub(_replace_bare_bearer, out)
    if "://" in out:
        out = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", out)
    out = _catalogue(out, lowered)
    if any(hint in lowered for hint in detectors.NAME_HINTS):
        if '"name"' in out:
            out = _ENV_ENTRY_JSON.sub(_replace_env_entry, out)
        if "name:" in out:
            out = _ENV_ENTRY_YAML.sub(_replace_env_entry, out)
        out = _redact_names(out)
    return _BARE_AWS_SECRET.sub(_replace_bare_aws_secret, out)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """An environment: values under secret-looking names dropped, every other value scanned."""
    return {
        name: (REDACTED if is_secret_env_name(name) and value else redact_text(value))
        for name, value in env.items()
    }


def redact_value(value: Any, *, name: str | None = None) -> Any:
    """Structured data (observation fields, parsed JSON): redact by key name, then by shape."""
    if name is not None and is_secret_name(name) and isinstance(value, str | int | float | bytes) and value:
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        entry_name = value.get("name")
        is_secret_entry = isinstance(entry_name, str) and is_secret_env_name(entry_name)
        return {
            key: (
                REDACTED
                if is_secret_entry and key == "value" and item
                else redact_value(item, name=key if isinstance(key, str) else None)
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact_value(item) for item in value)
    return value


def redact_observation(observation: findings.Observation) -> findings.Observation:
    """One observation with its text, command and fields redacted."""
    return dataclasses.replace(
        observation,
        subject=redact_text(observation.subject),
        text=redact_text(observation.text),
        command=redact_text(observation.command),
        fields=redact_value(dict(observation.fields)),
        resolved_by=redact_text(observation.resolved_by),
    )


def redact_evidence(evidence: findings.Evidence) -> findings.Evidence:
    """One piece of evidence with everything a human will read redacted."""
    return dataclasses.replace(
        evidence,
        command=redact_text(evidence.command),
        excerpt=redact_text(evidence.excerpt),
        expected=redact_text(evidence.expected),
        observed=redact_text(evidence.observed),
    )


def redact_finding(finding: findings.Finding) -> findings.Finding:
    """One finding with its summary, next step and evidence redacted."""
    return dataclasses.replace(
        finding,
        summary=redact_text(finding.summary),
        next_step=redact_text(finding.next_step),
        subject=redact_text(finding.subject),
        resolved_by=redact_text(finding.resolved_by),
        evidence=tuple(redact_evidence(item) for item in finding.evidence),
    )


def redact_report(snapshot: report.SnapshotReport) -> report.SnapshotReport:
    """A whole snapshot report, ready to store or post: every free-text field passes through here."""
    return dataclasses.replace(
        snapshot,
        verdict=dataclasses.replace(snapshot.verdict, summary=redact_text(snapshot.verdict.summary)),
        findings=tuple(redact_finding(item) for item in snapshot.findings),
        collectors=tuple(
            dataclasses.replace(item, detail=redact_text(item.detail)) for item in snapshot.collectors
        ),
        observations=tuple(redact_observation(item) for item in snapshot.observations),
        unexplained=tuple(redact_observation(item) for item in snapshot.unexplained),
        placement={key: redact_value(value, name=key) for key, value in snapshot.placement.items()},
        not_checked=tuple(redact_text(item) for item in snapshot.not_checked),
        followed=tuple(redact_text(item) for item in snapshot.followed),
    )
