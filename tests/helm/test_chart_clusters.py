"""Named clusters in the chart: the rendered cluster file is one the bot accepts, every remote cluster's
credentials come from its own Secret mounted where that file says, and the in-cluster RBAC is unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.clusters.registry import Clusters
from bot.clusters.spec import parse_specs
from bot.config import load_settings
from tests.helm.chart import Helm, env_of, of_kind, only, parse_manifests
from tests.helm.scenarios import SCENARIOS

pytestmark = pytest.mark.helm


def _render(helm: Helm, values: dict[str, Any]) -> list[dict[str, Any]]:
    return parse_manifests(text=helm.template(values=values))


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return only(docs=docs, kind="Deployment")["spec"]["template"]["spec"]["containers"][0]


def test_the_rendered_cluster_file_is_accepted_by_the_bot_and_names_every_cluster(helm: Helm) -> None:
    docs = _render(helm, SCENARIOS["many-clusters"])
    text = only(docs=docs, kind="ConfigMap")["data"]["clusters.yaml"]
    specs = parse_specs(text=text, source="chart")
    assert [spec.name for spec in specs] == ["local", "prod-east", "prod-west", "slurm-b"]
    by_name = {spec.name: spec for spec in specs}
    assert by_name["local"].kubernetes is not None and by_name["local"].kubernetes.in_cluster
    assert by_name["prod-east"].default and by_name["prod-east"].kubernetes.context == "east"
    assert by_name["prod-west"].max_snapshots == 2 and by_name["prod-west"].bounds == {"deadline_seconds": 30}
    assert by_name["slurm-b"].slurm.url == "https://slurmrestd.b:6820" and by_name["slurm-b"].slurm.user == "triage"
    env = env_of(container=_container(docs))
    assert env["TRIAGE_CLUSTERS_FILE"]["value"] == "/etc/triage/config/clusters.yaml"


def test_each_remote_cluster_reads_its_credentials_from_its_own_secret_where_the_file_points(
    helm: Helm, tmp_path: Path
) -> None:
    docs = _render(helm, SCENARIOS["many-clusters"])
    pod = only(docs=docs, kind="Deployment")["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {mount["name"]: mount for mount in _container(docs)["volumeMounts"]}
    secrets = {name: volume["secret"] for name, volume in volumes.items() if "secret" in volume}
    assert {name: secret["secretName"] for name, secret in secrets.items()} == {
        "cluster-prod-east": "kubeconfig-prod-east", "cluster-prod-west": "kubeconfig-prod-west",
        "cluster-slurm-b": "slurm-b-jwt"}
    assert secrets["cluster-prod-west"]["items"] == [{"key": "config", "path": "kubeconfig"}]
    assert secrets["cluster-slurm-b"]["items"] == [{"key": "token", "path": "token"}]
    assert all(mounts[name]["readOnly"] for name in secrets)
    specs = parse_specs(text=only(docs=docs, kind="ConfigMap")["data"]["clusters.yaml"], source="chart")
    for spec in specs:
        path = (spec.kubernetes.kubeconfig if spec.kubernetes else spec.slurm.token_file)  # type: ignore[union-attr]
        if path is None:
            continue  # the in-cluster service account
        mount = mounts[f"cluster-{spec.name}"]["mountPath"]
        items = secrets[f"cluster-{spec.name}"]["items"]
        assert str(path) == f"{mount}/{items[0]['path']}"
    # The same file the bot would load from TRIAGE_CLUSTERS_FILE.
    file = tmp_path / "clusters.yaml"
    file.write_text(only(docs=docs, kind="ConfigMap")["data"]["clusters.yaml"], encoding="utf-8")
    assert Clusters.from_settings(load_settings(TRIAGE_CLUSTERS_FILE=str(file))).names[0] == "local"


def test_without_named_clusters_nothing_about_the_deployment_changes(helm: Helm) -> None:
    docs = _render(helm, {})
    assert of_kind(docs=docs, kind="ConfigMap") == []
    assert "TRIAGE_CLUSTERS_FILE" not in env_of(container=_container(docs))
    assert env_of(container=_container(docs))["TRIAGE_IN_CLUSTER"]["value"] == "true"


def test_remote_clusters_leave_the_in_cluster_rbac_exactly_as_it_was(helm: Helm) -> None:
    plain = _render(helm, {})
    many = _render(helm, SCENARIOS["many-clusters"])
    assert only(docs=many, kind="ClusterRole")["rules"] == only(docs=plain, kind="ClusterRole")["rules"]
    assert of_kind(docs=many, kind="Role") == [] and len(of_kind(docs=many, kind="ClusterRoleBinding")) == 1


def test_changing_the_cluster_list_rolls_the_pods(helm: Helm) -> None:
    first = only(docs=_render(helm, SCENARIOS["many-clusters"]), kind="Deployment")
    changed = {"clusters": {**SCENARIOS["many-clusters"]["clusters"], "inCluster": "here"}}
    second = only(docs=_render(helm, changed), kind="Deployment")
    key = "checksum/clusters"
    assert first["spec"]["template"]["metadata"]["annotations"][key] != (
        second["spec"]["template"]["metadata"]["annotations"][key])


@pytest.mark.parametrize(
    "remote",
    [
        [{"name": "slurm", "slurm": {"url": "https://x", "tokenSecretName": "t"}}],
        [{"name": "Prod", "kubernetes": {"secretName": "k"}}],
        [{"name": "a", "kubernetes": {"secretName": "k"}, "slurm": {"url": "https://x", "tokenSecretName": "t"}}],
        [{"name": "a"}],
        [{"name": "a", "kubernetes": {"secretName": "k", "kubeconfig": "apiVersion: v1"}}],
        [{"name": "a", "slurm": {"url": "https://x", "tokenSecretName": "t", "token": "eyJ..."}}],
        [{"name": "a", "kubernetes": {"secretName": "k"}, "bounds": {"speed": 1}}],
    ],
)
def test_the_schema_refuses_bad_cluster_entries_and_inline_credentials(helm: Helm, remote: list[Any]) -> None:
    result = helm.template_result(values={"clusters": {"remote": remote}})
    assert result.returncode != 0 and "clusters" in result.stderr
