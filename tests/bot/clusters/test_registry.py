"""The cluster list (file, env or the single-cluster variables) and which cluster an id means."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.clusters.registry import AmbiguousTarget, ClusterError, Clusters, UnknownCluster
from bot.clusters.spec import ClusterConfigError
from bot.config import load_settings
from bot.evidence.targets import InvalidTarget, Platform, parse_target
from tests.support.clusters import clusters_document

TWO_KUBE_ONE_SLURM = clusters_document(
    {"name": "prod-east", "kubernetes": {"kubeconfig": "/etc/triage/east"}},
    {"name": "prod-west", "kubernetes": {"kubeconfig": "/etc/triage/west", "context": "w"},
     "bounds": {"deadline_seconds": 7}, "max_snapshots": 2},
    {"name": "slurm-a", "slurm": {"backend": "cli", "cluster": "a"}},
)


def _clusters(document: str) -> Clusters:
    return Clusters.from_settings(load_settings(TRIAGE_CLUSTERS=document))


def test_without_a_cluster_list_one_kubernetes_and_one_slurm_cluster_come_from_the_old_variables() -> None:
    clusters = Clusters.from_settings(load_settings(KUBECONFIG="/k/config", TRIAGE_KUBE_CONTEXT="ctx"))
    assert clusters.names == ("kubernetes", "slurm") and clusters.legacy
    assert clusters.get("kubernetes").kubernetes is not None
    assert clusters.get("kubernetes").describe() == "/k/config, context ctx"


@pytest.mark.parametrize("raw", ["ml/train-llm", "job/ml/train-llm", "88123", "slurm:88123"])
def test_with_one_cluster_of_each_kind_ids_stay_exactly_as_they_were(raw: str) -> None:
    clusters = Clusters.from_settings(load_settings())
    resolved = clusters.resolve(parse_target(raw))
    assert resolved == parse_target(raw) and resolved.cluster is None
    assert resolved.key == parse_target(raw).key


def test_naming_the_only_cluster_of_a_kind_is_accepted_and_shown_as_before() -> None:
    clusters = _clusters(TWO_KUBE_ONE_SLURM)
    assert clusters.resolve(parse_target("slurm-a:88123")).key == "slurm:88123"
    assert clusters.name_for(parse_target("88123")) == "slurm-a"


def test_an_id_without_a_cluster_when_two_of_its_kind_exist_is_refused_with_the_clusters_listed() -> None:
    with pytest.raises(AmbiguousTarget) as refused:
        _clusters(TWO_KUBE_ONE_SLURM).resolve(parse_target("ml/train-llm"))
    message = str(refused.value)
    assert "prod-east" in message and "prod-west" in message
    assert "`prod-east:ml/train-llm`" in message and "/triage config cluster" in message
    assert isinstance(refused.value, InvalidTarget)  # the router and the terminal refuse it like a bad id


def test_the_channel_default_then_the_marked_default_decide_an_ambiguous_id() -> None:
    clusters = _clusters(TWO_KUBE_ONE_SLURM)
    assert clusters.resolve(parse_target("ml/x"), prefer="prod-west").key == "prod-west:ml/x"
    assert clusters.resolve(parse_target("88123"), prefer="prod-west").key == "slurm:88123"  # other kind: ignored
    marked = _clusters(clusters_document(
        {"name": "a", "kubernetes": {}}, {"name": "b", "kubernetes": {}, "default": True}))
    assert marked.resolve(parse_target("ml/x")).key == "b:ml/x"
    assert marked.resolve(parse_target("ml/x"), prefer="a").key == "a:ml/x"


def test_a_named_cluster_must_exist_and_be_of_the_ids_kind() -> None:
    clusters = _clusters(TWO_KUBE_ONE_SLURM)
    with pytest.raises(UnknownCluster, match=r"no cluster `prod-north`.*prod-east \(Kubernetes\).*slurm-a \(Slurm\)"):
        clusters.resolve(parse_target("prod-north:ml/x"))
    with pytest.raises(ClusterError, match=r"`slurm-a` is a Slurm cluster, and `slurm-a:ml/x` is a Kubernetes id"):
        clusters.resolve(parse_target("slurm-a:ml/x"))
    with pytest.raises(ClusterError, match="No Slurm cluster is configured"):
        _clusters(clusters_document({"name": "k", "kubernetes": {}})).resolve(parse_target("88123"))


def test_each_cluster_snapshots_with_its_own_access_bounds_and_probe_setting() -> None:
    settings = load_settings(TRIAGE_CLUSTERS=TWO_KUBE_ONE_SLURM, TRIAGE_NODE_PROBE_RUNNER="srun")
    clusters = Clusters.from_settings(settings)
    west = clusters.settings_for(clusters.get("prod-west"), settings)
    assert (west.kubeconfig, west.kube_context, west.bounds.deadline_seconds) == (Path("/etc/triage/west"), "w", 7)
    assert west.bounds.call_timeout_seconds == settings.bounds.call_timeout_seconds
    assert west.node_probe_runner == "off"  # probes run only where the cluster's entry allows them
    slurm = clusters.settings_for(clusters.get("slurm-a"), settings)
    assert (slurm.slurm_backend, slurm.slurm_cluster) == ("cli", "a")
    assert clusters.gate("prod-west").limit == 2 and clusters.gate("prod-east").limit == 4


def test_a_rest_cluster_reads_its_token_from_the_mounted_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("jwt-from-secret\n", encoding="utf-8")
    settings = load_settings(TRIAGE_CLUSTERS=clusters_document(
        {"name": "slurm-b", "slurm": {"backend": "rest", "url": "http://127.0.0.1:6820", "token_file": str(token),
                                      "user": "root"}}))
    clusters = Clusters.from_settings(settings)
    narrowed = clusters.settings_for(clusters.get("slurm-b"), settings)
    assert (narrowed.slurm_backend, narrowed.slurm_rest_token, narrowed.slurm_rest_user) == (
        "rest", "jwt-from-secret", "root")


def test_the_cluster_list_is_read_from_a_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "clusters.yaml"
    path.write_text("clusters:\n  - name: gpu-a\n    kubernetes: {in_cluster: true}\n"
                    "  - name: slurm-a\n    slurm: {cluster: a}\n", encoding="utf-8")
    clusters = Clusters.from_settings(load_settings(TRIAGE_CLUSTERS_FILE=str(path)))
    assert clusters.names == ("gpu-a", "slurm-a") and clusters.of(Platform.SLURM)[0].slurm is not None
    assert "TRIAGE_CLUSTERS_FILE" in clusters.source and not clusters.legacy


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("clusters: []", "expected `clusters:`"),
        ("clusters: [{name: slurm, slurm: {}}]", "`slurm` is reserved"),
        ("clusters: [{name: Prod, kubernetes: {}}]", "lowercase"),
        ("clusters: [{name: a}]", "exactly one of"),
        ("clusters: [{name: a, kubernetes: {}, slurm: {}}]", "exactly one of"),
        ("clusters: [{name: a, slurm: {backend: rest}}]", "needs url"),
        ("clusters: [{name: a, slurm: {backend: rest, url: 'http://x', cluster: b}}]", "belongs to backend: cli"),
        ("clusters: [{name: a, slurm: {cluster: 'a; rm -rf /'}}]", "slurm.cluster"),
        ("clusters: [{name: a, kubernetes: {}, bounds: {deadline_seconds: 0}}]", "greater than 0"),
        ("clusters: [{name: a, kubernetes: {}, bounds: {speed: 1}}]", "unknown bounds speed"),
        ("clusters: [{name: a, kubernetes: {}, token: x}]", "Extra inputs"),
        ("clusters: [{name: a, kubernetes: {}}, {name: a, kubernetes: {}}]", "repeated: a"),
        ("clusters: [{name: a, kubernetes: {}, default: true}, {name: b, kubernetes: {}, default: true}]",
         "at most one default"),
        ("clusters: [{name: a, kubernetes: {in_cluster: true, kubeconfig: /x}}]", "takes no kubeconfig"),
        (": :", "not valid YAML"),
    ],
)
def test_a_broken_cluster_list_is_refused_naming_the_entry_and_the_fix(document: str, says: str) -> None:
    with pytest.raises(ClusterConfigError, match=r"^TRIAGE_CLUSTERS") as refused:
        _clusters(document)
    assert says in str(refused.value)


def test_an_unreadable_cluster_file_is_named() -> None:
    with pytest.raises(ClusterConfigError, match="TRIAGE_CLUSTERS_FILE=/nonexistent/clusters.yaml: cannot read"):
        Clusters.from_settings(load_settings(TRIAGE_CLUSTERS_FILE="/nonexistent/clusters.yaml"))
