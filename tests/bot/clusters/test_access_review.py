"""What the bot may read on each cluster is asked of the API server (SelfSubjectAccessReview and
SelfSubjectRulesReview), and the lab server answers from the same RBAC rules it enforces on reads."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.clusters.registry import Clusters
from bot.config import load_settings
from bot.diagnosis.service import diagnose
from bot.evidence.findings import CollectorOutcome
from bot.lab.kube_api import KubeApiServer
from handlers.main import typer_app
from tests.support.clusters import clusters_document, kubernetes_entry, lab_clusters, refusing_kubeconfig


@pytest.fixture
def labs(tmp_path: Path) -> Iterator[dict[str, KubeApiServer]]:
    """Two lab clusters; on prod-west the bot may not read pod logs."""
    with lab_clusters(tmp_path=tmp_path, scenarios_by_name={"prod-east": "oom", "prod-west": "oom"}) as servers:
        servers["prod-west"].state.deny(group="", resource="pods/log")
        yield servers


def _document(tmp_path: Path, *extra: dict[str, Any]) -> str:
    return clusters_document(kubernetes_entry(name="prod-east", tmp_path=tmp_path),
                             kubernetes_entry(name="prod-west", tmp_path=tmp_path), *extra)


def _clusters_cli(tmp_path: Path, *args: str, document: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(typer_app(), ["clusters", *args], env={"TRIAGE_CLUSTERS": document})
    return result.exit_code, result.stdout, result.stderr


def test_triage_bot_clusters_lists_each_cluster_with_what_its_api_server_allows(
    labs: dict[str, KubeApiServer], tmp_path: Path
) -> None:
    code, out, _ = _clusters_cli(tmp_path, "--format", "json", document=_document(tmp_path))
    assert code == 0
    listed = {item["name"]: item for item in json.loads(out)["clusters"]}
    assert listed["prod-east"]["reachable"] and listed["prod-east"]["version"] == "v1.30.0-lab"
    refused = {name: [p["read"] for p in item["permissions"] if not p["allowed"]] for name, item in listed.items()}
    assert refused == {"prod-east": [], "prod-west": ["get pods/log"]}
    assert "get pods/log" in {p["read"] for p in listed["prod-east"]["permissions"]}
    # Asked, not guessed: every permission is one SelfSubjectAccessReview, plus one rules review.
    reviews = [r.path for r in labs["prod-west"].requests if r.method == "POST"]
    assert reviews.count("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews") == len(listed["prod-west"]["permissions"])
    assert reviews.count("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews") == 1
    code, text, _ = _clusters_cli(tmp_path, document=_document(tmp_path))
    assert code == 0 and "prod-west: the API server refuses get pods/log" in text


def test_the_review_agrees_with_what_a_snapshot_then_gets(labs: dict[str, KubeApiServer], tmp_path: Path) -> None:
    settings = load_settings(TRIAGE_CLUSTERS=_document(tmp_path))
    clusters = Clusters.from_settings(settings)
    east = diagnose(target="prod-east:ml/train-llm", settings=settings, clusters=clusters)
    west = diagnose(target="prod-west:ml/train-llm", settings=settings, clusters=clusters)
    logs = {report.cluster: next(c for c in report.collectors if c.name == "logs") for report in (east, west)}
    assert logs["prod-east"].outcome is CollectorOutcome.OK
    assert logs["prod-west"].outcome is CollectorOutcome.FORBIDDEN
    assert "snapshot.forbidden" in {finding.rule for finding in west.findings}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_auth_can_i_gets_the_same_answers_from_the_lab(labs: dict[str, KubeApiServer], tmp_path: Path) -> None:
    def can_i(name: str, *args: str) -> str:
        done = subprocess.run(["kubectl", "--kubeconfig", str(tmp_path / f"kubeconfig-{name}"), "auth", "can-i",
                               *args], capture_output=True, text=True, timeout=30, check=False)
        return done.stdout.strip()

    assert can_i("prod-west", "get", "pods", "--subresource=log", "-n", "ml").startswith("no - RBAC: ")
    assert can_i("prod-east", "get", "pods", "--subresource=log", "-n", "ml") == "yes"
    assert can_i("prod-west", "list", "pods", "-n", "ml") == "yes"
    assert "pods/log" not in can_i("prod-west", "--list", "-n", "ml")


def test_an_unreachable_cluster_is_listed_with_the_reason_and_the_command_exits_non_zero(
    labs: dict[str, KubeApiServer], tmp_path: Path
) -> None:
    refusing_kubeconfig(tmp_path=tmp_path, name="gone")
    document = _document(tmp_path, kubernetes_entry(name="gone", tmp_path=tmp_path))
    code, out, _ = _clusters_cli(tmp_path, "--format", "json", "--timeout", "3", document=document)
    assert code == 4
    listed = {item["name"]: item for item in json.loads(out)["clusters"]}
    assert listed["prod-east"]["reachable"] and listed["prod-west"]["reachable"]
    assert not listed["gone"]["reachable"] and "refused" in listed["gone"]["detail"]


def test_a_role_bound_in_one_namespace_shows_as_readable_only_there(
    labs: dict[str, KubeApiServer], tmp_path: Path
) -> None:
    from bot.lab.rbac import Rule

    labs["prod-east"].state.rbac.rules = [Rule(api_groups=("", "batch"), resources=("pods", "pods/log", "jobs"),
                                               namespaces=("ml",))]
    code, out, _ = _clusters_cli(tmp_path, "--format", "json", "--namespace", "ml", document=_document(tmp_path))
    assert code == 0
    east = next(item for item in json.loads(out)["clusters"] if item["name"] == "prod-east")
    by_read = {p["read"]: p for p in east["permissions"]}
    assert by_read["list pods"]["allowed"] and by_read["list pods"]["namespace_only"]
    assert not by_read["get nodes"]["allowed"]  # cluster-scoped: a namespaced Role cannot grant it
    assert east["rules_namespace"] == "ml" and any("pods" in rule["resources"] for rule in east["rules"])


def test_a_broken_cluster_list_is_refused_by_the_command_with_what_to_fix(tmp_path: Path) -> None:
    code, _, err = _clusters_cli(tmp_path, document="clusters: [{name: a}]")
    assert code == 2 and "cluster #1 (a)" in err and "exactly one of" in err
