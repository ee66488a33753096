"""values.schema.json makes helm refuse bad values before anything renders."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helm.chart import Helm

pytestmark = pytest.mark.helm


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"replicaCount": "two"}, "replicaCount: Invalid type. Expected: integer, given: string"),
        ({"replicaCount": -1}, "replicaCount: Must be greater than or equal to 0"),
        ({"mode": "websocket"}, "mode: mode must be one of the following"),
        ({"database": {"type": "mysql"}}, "database.type: database.type must be one of the following"),
        ({"slackBotToken": "xoxb-123"}, "Additional property slackBotToken is not allowed"),
        ({"config": {"signingSecret": "abc"}}, "Additional property signingSecret is not allowed"),
        ({"containerPort": 80}, "containerPort: Must be greater than or equal to 1024"),
        ({"rbac": {"namespaces": ["Not_A_Namespace"]}}, "rbac.namespaces.0: Does not match pattern"),
        (
            {"image": {"repository": "x", "pullPolicy": "Sometimes"}},
            "image.pullPolicy: image.pullPolicy must be one of",
        ),
        (
            {"extraEnv": [{"name": "DATABASE_URL", "value": "postgresql://u:pw@db/t"}]},
            "extraEnv.0: Must not validate the schema",
        ),
        ({"resources": {"limits": {"memory": "lots"}}}, "resources.limits.memory: Does not match pattern"),
    ],
)
def test_the_schema_rejects_bad_values_with_helms_message(
    helm: Helm, values: dict[str, Any], complaint: str
) -> None:
    result = helm.template_result(values=values)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert complaint in result.stderr


def test_the_schema_rejects_a_string_replica_count_given_on_the_command_line(helm: Helm) -> None:
    result = helm.template_result(set_args=["replicaCount=two"])
    assert result.returncode != 0
    assert "replicaCount: Invalid type. Expected: integer, given: string" in result.stderr


def test_the_schema_accepts_every_value_the_readme_shows(helm: Helm) -> None:
    values = {
        "replicaCount": 2,
        "database": {"type": "postgresql"},
        "config": {"adminUserIds": "U01ABC,U02DEF", "prometheusUrl": "http://prometheus.monitoring:9090"},
        "extraEnv": [{"name": "TRIAGE_SNAPSHOT_MAX_LOG_BYTES_PER_CONTAINER", "value": "32768"}],
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
    }
    result = helm.template_result(values=values)
    assert result.returncode == 0, result.stderr


def test_secret_variables_in_extra_env_are_accepted_from_a_secret_reference(helm: Helm) -> None:
    ref = {"secretKeyRef": {"name": "other", "key": "jwt"}}
    result = helm.template_result(values={"extraEnv": [{"name": "SLURM_JWT", "valueFrom": ref}]})
    assert result.returncode == 0, result.stderr
