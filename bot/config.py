"""One settings object built from the environment and passed in; nothing reads os.environ elsewhere.

The settings are pydantic models that fill what their caller leaves out from the environment: the process's
variables over a `.env` file in the working directory, names matched without regard to case. (This is what
pydantic-settings did for us; reading it here keeps its ~50 ms import out of every command's start-up.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
ENV_FILE = Path(".env")


def environment() -> dict[str, str]:
    """The process's variables over the `.env` file's (when there is one), keyed by upper-cased name."""
    values: dict[str, str] = {}
    if ENV_FILE.is_file():
        from dotenv import dotenv_values

        values = {key.upper(): value for key, value in dotenv_values(ENV_FILE, encoding="utf-8").items()
                  if value is not None}
    values.update((key.upper(), value) for key, value in os.environ.items())
    return values


class _FromEnvironment(BaseModel):
    """A model whose fields the caller leaves out are read from the environment (alias, else prefix + name)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    env_prefix: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _fill_from_environment(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        found = environment()
        filled = dict(data)
        for name, field in cls.model_fields.items():
            if name in data or (field.alias and field.alias in data):
                continue
            variable = (field.alias or f"{cls.env_prefix}{name}").upper()
            if variable in found:
                filled[field.alias or name] = found[variable]
        return filled


class SnapshotBounds(_FromEnvironment):
    """Hard caps on one diagnostic snapshot: time, items and bytes."""

    env_prefix: ClassVar[str] = "TRIAGE_SNAPSHOT_"

    deadline_seconds: float = Field(default=20.0, gt=0, le=600)
    call_timeout_seconds: float = Field(default=5.0, gt=0, le=120)
    max_items_per_list: int = Field(default=500, ge=1, le=100_000)
    page_size: int = Field(default=250, ge=1, le=5_000)
    max_log_bytes_per_container: int = Field(default=16_384, ge=256, le=10_000_000)
    max_log_lines_per_container: int = Field(default=200, ge=1, le=100_000)
    max_total_evidence_bytes: int = Field(default=262_144, ge=1_024, le=100_000_000)
    # Bytes read from any one API response, counted while it streams in (a server may ignore `limit`).
    max_response_bytes: int = Field(default=8_388_608, ge=65_536, le=1_000_000_000)
    max_concurrency: int = Field(default=8, ge=1, le=64)


class Settings(_FromEnvironment):
    """Everything the bot needs, from the environment (and an optional .env file)."""

    # Slack
    slack_bot_token: str | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    slack_signing_secret: str | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    slack_app_token: str | None = Field(default=None, alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(default="https://slack.com/api/", alias="SLACK_API_URL")
    slack_admin_user_ids: str = Field(default="", alias="TRIAGE_ADMIN_USER_IDS")
    slack_snapshot_allowed_user_ids: str = Field(default="", alias="TRIAGE_SNAPSHOT_ALLOWED_USER_IDS")

    # Storage
    database_url: str = Field(default="sqlite:///./triage.db", alias="DATABASE_URL")

    # Server (waitress): worker threads, open connections, how long an idle or stalled client may hold one,
    # and the largest request body (Slack's payloads are a few KB).
    port: int = Field(default=3000, alias="PORT")
    http_threads: int = Field(default=8, ge=1, le=256, alias="TRIAGE_HTTP_THREADS")
    http_connection_limit: int = Field(default=1000, ge=10, le=100_000, alias="TRIAGE_HTTP_CONNECTION_LIMIT")
    http_idle_timeout_seconds: int = Field(default=10, ge=1, le=3600, alias="TRIAGE_HTTP_IDLE_TIMEOUT_SECONDS")
    http_max_body_bytes: int = Field(default=1_048_576, ge=65_536, le=104_857_600, alias="TRIAGE_HTTP_MAX_BODY_BYTES")
    instance_id: str = Field(default="", alias="TRIAGE_INSTANCE_ID")

    # Kubernetes
    kubeconfig: Path | None = Field(default=None, alias="KUBECONFIG")
    kube_context: str | None = Field(default=None, alias="TRIAGE_KUBE_CONTEXT")
    in_cluster: bool = Field(default=False, alias="TRIAGE_IN_CLUSTER")
    # Where the GPU operator / device plugin pods run; read (field-selected by node) under failing or nominated
    # nodes. Comma-separated; add kube-system when the device plugin is installed without the operator.
    gpu_operator_namespaces: str = Field(default="gpu-operator", alias="TRIAGE_GPU_OPERATOR_NAMESPACES")

    # Slurm
    slurm_backend: str = Field(default="cli", alias="TRIAGE_SLURM_BACKEND")  # cli | rest | off
    slurm_rest_url: str | None = Field(default=None, alias="TRIAGE_SLURMRESTD_URL")
    slurm_rest_token: str | None = Field(default=None, alias="SLURM_JWT")
    slurm_rest_user: str | None = Field(default=None, alias="TRIAGE_SLURMRESTD_USER")
    slurm_cluster: str | None = Field(default=None, alias="TRIAGE_SLURM_CLUSTER")  # cli: `-M <cluster>`

    # Named clusters (bot/clusters): a YAML file, or the same YAML/JSON inline; unset means one Kubernetes
    # cluster and one Slurm cluster from the variables above.
    clusters_file: Path | None = Field(default=None, alias="TRIAGE_CLUSTERS_FILE")
    clusters_inline: str | None = Field(default=None, alias="TRIAGE_CLUSTERS")

    # GPU and fabric probes (off unless an operator turns them on)
    prometheus_url: str | None = Field(default=None, alias="TRIAGE_PROMETHEUS_URL")
    node_probe_runner: str = Field(default="off", alias="TRIAGE_NODE_PROBE_RUNNER")  # off | k8s-debug | srun
    node_probe_image: str | None = Field(default=None, alias="TRIAGE_NODE_PROBE_IMAGE")  # k8s-debug pod image
    # Where k8s-debug creates its probe pods (the chart's nodeProbe RBAC grants pod create/delete there only).
    node_probe_namespace: str = Field(default="default", alias="TRIAGE_NODE_PROBE_NAMESPACE")

    # Alert intake (POST /alerts/alertmanager): off until a token is set
    alerts_token: str | None = Field(default=None, alias="TRIAGE_ALERTS_TOKEN")
    alerts_rules_path: Path | None = Field(default=None, alias="TRIAGE_ALERTS_RULES")
    alerts_queue_size: int = Field(default=64, ge=1, le=10_000, alias="TRIAGE_ALERTS_QUEUE_SIZE")
    alerts_max_body_bytes: int = Field(default=4_194_304, ge=1024, le=64 * 1024 * 1024,
                                       alias="TRIAGE_ALERTS_MAX_BODY_BYTES")

    # Scheduling
    scheduler_enabled: bool = Field(default=True, alias="TRIAGE_SCHEDULER_ENABLED")
    scheduler_poll_seconds: float = Field(default=5.0, gt=0, alias="TRIAGE_SCHEDULER_POLL_SECONDS")
    # On SIGTERM, how long in-flight snapshots may finish before they are recorded as interrupted
    # (below Kubernetes' terminationGracePeriodSeconds; the chart sets it from that value).
    shutdown_grace_seconds: float = Field(default=25.0, ge=0, alias="TRIAGE_SHUTDOWN_GRACE_SECONDS")

    bounds: SnapshotBounds = Field(default_factory=SnapshotBounds)

    @field_validator("slack_bot_token", "slack_signing_secret", "slack_app_token", "slurm_rest_token", mode="before")
    @classmethod
    def _blank_secret_is_no_secret(cls, value: object) -> object:
        """A secret of spaces is no secret: treated as unset, so `serve` refuses to start without one."""
        return (value.strip() or None) if isinstance(value, str) else value

    @property
    def admin_user_ids(self) -> frozenset[str]:
        """Slack user ids allowed to act as commander on any incident."""
        return frozenset(item.strip() for item in self.slack_admin_user_ids.split(",") if item.strip())

    @property
    def gpu_operator_namespace_list(self) -> tuple[str, ...]:
        """The GPU operator namespaces as valid namespace names (anything else is ignored, never requested)."""
        names = (item.strip() for item in self.gpu_operator_namespaces.split(","))
        return tuple(dict.fromkeys(name for name in names if _NAMESPACE.fullmatch(name)))

    @property
    def snapshot_allowed_user_ids(self) -> frozenset[str]:
        """Empty means everyone may run snapshots."""
        return frozenset(
            item.strip() for item in self.slack_snapshot_allowed_user_ids.split(",") if item.strip()
        )


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment, with explicit overrides (tests, CLI flags)."""
    return Settings(**overrides)  # type: ignore[arg-type]
