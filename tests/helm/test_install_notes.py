"""`helm install --dry-run` succeeds against a discovery stand-in and its NOTES tell the operator what to do next."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import CHART_DIR, NAMESPACE, RELEASE, Helm, isolated_env
from tests.helm.discovery_stub import discovery_server

pytestmark = pytest.mark.helm


def _install_dry_run(*, helm: Helm, values: dict[str, Any], home: Path) -> str:
    values_file = home / "values.yaml"
    values_file.write_text(yaml.safe_dump(values), encoding="utf-8")
    with discovery_server(kubeconfig=home / "kubeconfig") as requests:
        env = dict(isolated_env(home=home), KUBECONFIG=str(home / "kubeconfig"))
        result = subprocess.run(
            [
                helm.binary,
                "install",
                RELEASE,
                str(CHART_DIR),
                "--namespace",
                NAMESPACE,
                "--dry-run=client",
                "--disable-openapi-validation",
                "--values",
                str(values_file),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert {method for method, _ in requests} == {"GET"}, "a dry-run install must never write"
    return result.stdout.split("NOTES:", 1)[1]


def test_socket_mode_notes_ask_for_the_app_token_and_no_inbound_route(helm: Helm, tmp_path: Path) -> None:
    notes = _install_dry_run(
        helm=helm,
        values={"mode": "socket", "database": {"type": "postgresql"}, "replicaCount": 2},
        home=tmp_path,
    )
    assert "--from-literal=SLACK_APP_TOKEN=xapp-..." in notes
    assert "SLACK_SIGNING_SECRET" not in notes
    assert "--from-literal=DATABASE_URL=postgresql+psycopg://" in notes
    assert "no inbound route is needed" in notes
    assert "replicas: 2" in notes


def test_http_mode_notes_give_the_slack_request_url(helm: Helm, tmp_path: Path) -> None:
    values = {"ingress": {"enabled": True, "host": "triage.example.org", "tlsSecretName": "tls"}}
    notes = _install_dry_run(helm=helm, values=values, home=tmp_path)
    assert "https://triage.example.org/slack/events" in notes
    assert "--from-literal=SLACK_SIGNING_SECRET=..." in notes
    assert "DATABASE_URL" not in notes, "SQLite needs no database URL in the Secret"


def test_namespaced_rbac_notes_say_nodes_are_not_readable(helm: Helm, tmp_path: Path) -> None:
    notes = _install_dry_run(
        helm=helm, values={"rbac": {"namespaced": True, "namespaces": ["ml"]}}, home=tmp_path
    )
    assert "Roles in: ml; nodes are not readable" in notes
