"""The catalogue of what redaction recognises as a credential: shapes, command-line forms and secret names.

Each `Detector` is data: a pattern (the secret is its `secret` group, or the whole match), literal hints that
must occur before the pattern runs (a C-speed substring test keeps clean evidence cheap), and where the shape
comes from. The corpus of real credential shapes in `tests/hardening/secrets_corpus.yaml` is this catalogue's
test: every detector has samples there, and every secret a maintained detector set (Yelp's detect-secrets
plugins, run as the test's oracle) finds in the corpus must be gone after redaction.

Why not run detect-secrets at runtime: importing it costs about a second, and some of its patterns are
super-linear on hostile text (its JWT pattern takes 6.5 s on 60 KB of `eyJ` repeated; evidence is written by
the workload). The shapes below are theirs or the vendors' where they exist, anchored so every pattern scans
in linear time: a left boundary (lookbehind) or a literal prefix, and bounded repetition.
"""

from __future__ import annotations

import dataclasses
import re

REDACTED = "[REDACTED]"
_NOT_REDACTED = r"(?!\[REDACTED\])"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Detector:
    """One credential shape or command-line form."""

    name: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...]  # one must occur in the text (in `lowered` text when `lower_hints`); () runs always
    source: str
    lower_hints: bool = False


def _shape(name: str, pattern: str, hints: tuple[str, ...], source: str, *, flags: int = 0) -> Detector:
    return Detector(name=name, pattern=re.compile(pattern, flags), hints=hints, source=source)


def _cli(name: str, pattern: str, hints: tuple[str, ...], source: str) -> Detector:
    return Detector(
        name=name, pattern=re.compile(pattern, re.IGNORECASE), hints=hints, source=source, lower_hints=True
    )


# --- credentials recognised by their shape, wherever they appear ---------------------------------------------
# Every pattern starts with a literal, so the regex engine's own prefix search skips clean text about as fast
# as a substring test; the "not inside a longer word" check is a fixed-width lookbehind right after it.
SHAPES: tuple[Detector, ...] = (
    _shape("slack-token", r"x(?:ox[abposre]|app)-(?<![A-Za-z0-9-]x(?:ox[abposre]|app)-)[A-Za-z0-9-]{8,}", (),
           "detect-secrets SlackDetector (xox[abposr]-), plus app-level xapp- tokens"),
    _shape("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+", (),
           "detect-secrets SlackDetector (webhook URL)"),
    _shape("github-token", r"gh[pousr]_(?<![A-Za-z0-9_]gh[pousr]_)[A-Za-z0-9]{30,}", (),
           "detect-secrets GitHubTokenDetector"),
    _shape("github-fine-grained-pat", r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{40,}", (),
           "GitHub fine-grained personal access tokens"),
    _shape("gitlab-token",
           r"gl(?<![A-Za-z0-9_-]gl)(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent)-[A-Za-z0-9_-]{20,}", (),
           "detect-secrets GitLabTokenDetector"),
    _shape("huggingface-token", r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}", (), "Hugging Face user tokens"),
    _shape("ngc-api-key", r"nvapi-(?<![A-Za-z0-9_-]nvapi-)[A-Za-z0-9_-]{20,}", (),
           "NVIDIA NGC / build.nvidia.com personal API keys"),
    _shape("openai-anthropic-key", r"sk-(?<![A-Za-z0-9_-]sk-)(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
           (), "detect-secrets OpenAIDetector (sk-), Anthropic sk-ant-"),
    _shape("aws-access-key-id",
           r"A(?<![A-Z0-9]A)(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|ROA|PKA)[A-Z0-9]{16}(?![A-Z0-9])", (),
           "detect-secrets AWSKeyDetector"),
    _shape("google-api-key", r"AIza[0-9A-Za-z_-]{35}", (), "Google API keys"),
    _shape("google-oauth-token", r"ya29\.(?<![A-Za-z0-9_-]ya29\.)[0-9A-Za-z_-]{20,}", (),
           "Google OAuth access tokens"),
    _shape("jwt", r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", (),
           "detect-secrets JwtTokenDetector (anchored: header and claims both start eyJ)"),
    _shape("stripe-key", r"k_live_(?<![A-Za-z0-9_][rs]k_live_)(?<=[rs]k_live_)[0-9a-zA-Z]{24,}", (),
           "detect-secrets StripeDetector"),
    _shape("sendgrid-key", r"SG\.(?<![A-Za-z0-9_-]SG\.)[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", (),
           "detect-secrets SendGridDetector"),
    _shape("pypi-token", r"pypi-AgE[A-Za-z0-9_-]{70,}", (), "detect-secrets PypiTokenDetector"),
    _shape("npm-token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9])", (),
           "npm access tokens (detect-secrets NpmDetector covers the .npmrc form)"),
    _shape("databricks-token", r"dapi(?<![A-Za-z0-9_]dapi)[0-9a-f]{32}(?:-\d)?(?![A-Za-z0-9])", (),
           "Databricks personal access tokens"),
    _shape("azure-storage-key", r"AccountKey=(?<![A-Za-z0-9+/]AccountKey=)[A-Za-z0-9+/=]{88}", (),
           "detect-secrets AzureStorageKeyDetector"),
)

# --- passwords in command lines whose flag does not say `password` -------------------------------------------
# Tool-specific, because a short flag means something else elsewhere (`ssh -p 22`, `psql -p 5432`). The flag
# must come within the tool's next dozen arguments, each at most 200 characters, so scanning stays linear.
_QUOTED_OR_WORD = r"""(?:'[^'\n]*'|"[^"\n]*"|[^\s'"]\S*)"""


def _after_tool(tools: str, flag: str, value: str) -> str:
    """`<tool> ... <flag><value>`: the value is the `secret` group, never one already redacted. The
    arguments skipped on the way never start with the flag itself, so a second pass finds nothing new."""
    skipped = rf"(?:[ \t]+(?!(?-i:{flag}))\S{{1,200}}){{0,12}}?[ \t]+"
    return rf"(?<![\w-])(?:{tools}){skipped}(?-i:{flag})(?P<secret>{_NOT_REDACTED}{value})"


COMMAND_LINES: tuple[Detector, ...] = (
    _cli("mysql-p-flag",
         _after_tool("mysql|mysqldump|mysqladmin|mariadb|mariadb-dump|mysqlimport|mysqlsh", "-p", _QUOTED_OR_WORD),
         ("mysql", "mariadb"), "MySQL/MariaDB clients: -p<password> (no space)"),
    _cli("sshpass-p-flag", _after_tool("sshpass", "-p", r"[ \t]*" + _QUOTED_OR_WORD), ("sshpass",),
         "sshpass -p <password>"),
    _cli("redis-cli-a-flag", _after_tool("redis-cli", "-a", r"[ \t]+" + _QUOTED_OR_WORD), ("redis-cli",),
         "redis-cli -a <password>"),
    _cli("registry-login-p-flag",
         _after_tool(r"(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]+registry)[ \t]+login", "-p",
                     r"[ \t]+" + _QUOTED_OR_WORD),
         ("login",), "docker/podman/helm registry login -p <password>"),
    _cli("curl-user-password",
         _after_tool("curl|wget", "-u|--user", r"""[ \t]*['"]?[^:\s'"]{0,100}:[^\s'"]+"""),
         ("curl", "wget"), "curl -u user:password (the user name goes too)"),
    _cli("netrc-password",
         r"\bmachine[ \t]+\S{1,253}(?:[ \t]+login[ \t]+\S{1,253})?[ \t]+password[ \t]+(?P<secret>"
         + _NOT_REDACTED + r"\S+)",
         ("machine",), "~/.netrc one-line entries"),
    _cli("netrc-password-line", r"(?m)^[ \t]*password[ \t]+(?P<secret>" + _NOT_REDACTED + r"\S+)[ \t]*$",
         ("password",), "~/.netrc multi-line entries (a line holding only `password <value>`)"),
)

CATALOGUE: tuple[Detector, ...] = SHAPES + COMMAND_LINES

# --- secrets recognised by the name they are stored under ----------------------------------------------------
# Name segments that mark a secret wherever they appear in the name.
ALWAYS_SECRET_SEGMENTS = frozenset(
    {
        "secret", "secrets", "password", "passwords", "passwd", "pwd", "pass", "passphrase",
        "credential", "credentials", "jwt", "apikey", "privatekey", "signature", "sig",
    }
)  # fmt: skip
# Words that mark a secret even glued to another word in one segment: PGPASSWORD, dbpassword, SECRETKEY.
GLUED_SECRET_WORDS = ("password", "passwd", "secret", "credential", "passphrase", "apikey", "privatekey")
# A segment ending in `token` is a token (APITOKEN, authtoken); `tokens`, `tokenizer` are not.
GLUED_SECRET_SUFFIXES = ("token",)
# Glued `...key` segments that name a key, unlike `monkey` or `hotkey`.
GLUED_SECRET_KEYS = frozenset(
    {
        "apikey", "accesskey", "secretkey", "privatekey", "signingkey", "masterkey", "encryptionkey",
        "sessionkey", "authkey", "clientkey", "licensekey", "accountkey",
    }
)  # fmt: skip
# Segments that mark a secret only as the last word of the name: `GITHUB_TOKEN`, `api_key`,
# but not `max_tokens`, `token_count` or `sort_key_order`.
TRAILING_SECRET_SEGMENTS = frozenset({"token", "key", "auth", "cookie", "dsn"})
# Joined names that hold key material whatever their last word (kubeconfig `client-key-data`).
SECRET_NAME_PARTS = ("private_key", "secret_access_key", "client_secret", "key_data")
# A last word that says the value is *about* a secret, not the secret: `secretName`, `PASSWORD_FILE`.
METADATA_SEGMENTS = frozenset(
    {
        "name", "names", "ref", "refs", "keyref", "id", "ids", "path", "file", "dir", "mount",
        "volume", "provider", "type", "count", "length", "len", "size", "ttl", "expiry", "expires",
        "expiration", "version", "policy", "mode", "enabled", "required", "source", "namespace",
    }
)  # fmt: skip
# Environment names that contain a secret-looking word but are known to hold none.
INNOCUOUS_ENV_NAMES = frozenset({"TOKENIZERS_PARALLELISM", "KEYBOARD", "KEYMAP"})
ENV_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "JWT", "AUTH")
# Lowercase substrings without which no secret name can occur (gates the name rules).
NAME_HINTS = ("secret", "pass", "pwd", "cred", "jwt", "key", "token", "auth", "cookie", "dsn", "sig")
