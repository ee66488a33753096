"""The rendered manifests are well-formed Kubernetes objects: kubectl accepts them and the 1.32 schemas fit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import kubernetes_validate
import pytest

from tests.helm.chart import Helm, isolated_env, parse_manifests
from tests.helm.discovery_stub import discovery_server
from tests.helm.scenarios import SCENARIOS

pytestmark = pytest.mark.helm


def _kubectl_apply_dry_run(
    *, kubectl: str, manifests: str, home: Path, kubeconfig: Path
) -> subprocess.CompletedProcess[str]:
    env = dict(isolated_env(home=home), KUBECONFIG=str(kubeconfig))
    return subprocess.run(
        [kubectl, "apply", "--dry-run=client", "--validate=false", "-f", "-"],
        input=manifests,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kubectl_client_dry_run_accepts_every_rendered_object(
    helm: Helm, kubectl: str, name: str, tmp_path: Path
) -> None:
    manifests = helm.template(values=SCENARIOS[name])
    objects = parse_manifests(text=manifests)
    with discovery_server(kubeconfig=tmp_path / "kubeconfig") as requests:
        result = _kubectl_apply_dry_run(
            kubectl=kubectl, manifests=manifests, home=tmp_path, kubeconfig=tmp_path / "kubeconfig"
        )
    assert result.returncode == 0, result.stderr
    created = [line for line in result.stdout.splitlines() if line.endswith(" created (dry run)")]
    assert len(created) == len(objects), result.stdout
    assert {method for method, _ in requests} == {"GET"}, "a client dry-run must never write"


def test_kubectl_client_dry_run_rejects_an_unknown_kind(kubectl: str, tmp_path: Path) -> None:
    manifest = "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n"
    with discovery_server(kubeconfig=tmp_path / "kubeconfig"):
        result = _kubectl_apply_dry_run(
            kubectl=kubectl, manifests=manifest, home=tmp_path, kubeconfig=tmp_path / "kubeconfig"
        )
    assert result.returncode != 0
    assert 'no matches for kind "Deploymnet"' in result.stderr


def test_kubectl_client_dry_run_needs_api_discovery_even_without_validation(
    kubectl: str, tmp_path: Path
) -> None:
    """Why the stand-in exists: offline, kubectl 1.32 cannot map kinds to resources and gives up."""
    manifest = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x}\n"
    result = _kubectl_apply_dry_run(
        kubectl=kubectl, manifests=manifest, home=tmp_path, kubeconfig=tmp_path / "absent-kubeconfig"
    )
    assert result.returncode != 0
    assert "unable to recognize" in result.stderr or "connection refused" in result.stderr


KUBERNETES_VERSION = "1.32"  # the kubectl the CI fetches; the chart's kubeVersion floor is 1.25


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_rendered_object_validates_against_the_kubernetes_json_schema_strictly(
    helm: Helm, name: str
) -> None:
    for manifest in parse_manifests(text=helm.template(values=SCENARIOS[name])):
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_the_strict_schema_check_catches_a_wrong_type_and_an_unknown_field() -> None:
    base = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"spec": {"containers": [{"name": "c"}]}},
        },
    }
    wrong_type = {**base, "spec": {**base["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError, match="'two' is not of type 'integer'"):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSION, strict=True)
    misspelt = {
        **base,
        "spec": {**base["spec"], "template": {"spec": {"containers": [{"name": "c", "readinessprobe": {}}]}}},
    }
    with pytest.raises(kubernetes_validate.ValidationError, match="readinessprobe"):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSION, strict=True)
    kubernetes_validate.validate(base, KUBERNETES_VERSION, strict=True)
