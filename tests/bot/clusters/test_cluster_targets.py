"""`<cluster>:<id>`: the cluster is part of the id, validated as strictly as the rest of it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.evidence import targets

_cluster = st.from_regex(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True).filter(lambda name: name != "slurm")
_namespace = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
_name = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True)


def test_a_kubernetes_id_after_a_cluster_name_keeps_everything_and_adds_the_cluster() -> None:
    parsed = targets.parse_target("prod-east:ml/train-llm")
    assert (parsed.cluster, parsed.platform, parsed.namespace, parsed.name) == (
        "prod-east", targets.Platform.KUBERNETES, "ml", "train-llm")
    assert parsed.key == "prod-east:ml/train-llm" and parsed.workload_key == "ml/train-llm"
    assert targets.parse_target("prod-east:pytorchjob/ml/train-llm").kind is targets.WorkloadKind.PYTORCHJOB


def test_a_slurm_job_after_a_cluster_name_is_that_clusters_job() -> None:
    parsed = targets.parse_target("slurm-a:88123_4")
    assert (parsed.cluster, parsed.platform, parsed.name, parsed.key) == (
        "slurm-a", targets.Platform.SLURM, "88123_4", "slurm-a:88123_4")


@pytest.mark.parametrize("raw", ["slurm:88123", "SLURM:88123", "88123"])
def test_slurm_colon_still_means_the_default_slurm_cluster(raw: str) -> None:
    parsed = targets.parse_target(raw)
    assert parsed.cluster is None and parsed.key == "slurm:88123"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("Prod-East:ml/x", "not a cluster name"),
        ("9lives:ml/x", "not a cluster name"),
        ("prod_east:ml/x", "not a cluster name"),
        ("-east:ml/x", "not a cluster name"),
        ("a" * 41 + ":ml/x", "not a cluster name"),
        ("prod-east:slurm:1", "is not `<cluster>:<id>`"),
        ("prod-east: ml/x", "is not `<cluster>:<id>`"),
        ("prod-east:", "Missing job id"),
        ("prod-east:ml/Train", "invalid name"),
        ("prod-\u0435ast:ml/x", "not a cluster name"),  # Cyrillic e
        ("prod-east:ml/x\n", None),  # trailing whitespace around the whole id is fine
    ],
)
def test_a_bad_cluster_part_is_refused_with_the_accepted_forms(raw: str, says: str | None) -> None:
    if says is None:
        assert targets.parse_target(raw).cluster == "prod-east"
        return
    with pytest.raises(targets.InvalidTarget) as refused:
        targets.parse_target(raw)
    message = str(refused.value)
    assert says in message and ("Accepted forms" in message or "Missing job id" in message)
    assert "<cluster>:" in targets.ACCEPTED_FORMS
    assert all(32 <= ord(ch) < 127 for ch in message)


@settings(max_examples=300)
@given(cluster=_cluster, namespace=_namespace, name=_name, kind=st.sampled_from([None, *targets.WorkloadKind]))
def test_every_well_formed_cluster_qualified_id_parses_and_round_trips(
    cluster: str, namespace: str, name: str, kind: targets.WorkloadKind | None
) -> None:
    raw = f"{cluster}:" + (f"{kind.value}/" if kind else "") + f"{namespace}/{name}"
    parsed = targets.parse_target(raw)
    assert (parsed.cluster, parsed.namespace, parsed.name, parsed.kind) == (cluster, namespace, name, kind)
    assert targets.parse_target(parsed.key) == parsed


@settings(max_examples=200)
@given(cluster=_cluster, number=st.integers(min_value=1, max_value=9_999_999_999))
def test_every_cluster_qualified_slurm_job_parses_and_round_trips(cluster: str, number: int) -> None:
    parsed = targets.parse_target(f"{cluster}:{number}")
    assert (parsed.cluster, parsed.platform, parsed.name) == (cluster, targets.Platform.SLURM, str(number))
    assert targets.parse_target(parsed.key) == parsed
