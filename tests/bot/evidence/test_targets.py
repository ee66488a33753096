"""Target ids are validated before any cluster is asked."""

import pytest

from bot.evidence import targets


def test_namespace_and_name_is_a_kubernetes_target_of_unknown_kind() -> None:
    parsed = targets.parse_target("ml/train-7")
    assert parsed.platform is targets.Platform.KUBERNETES
    assert (parsed.namespace, parsed.name, parsed.kind) == ("ml", "train-7", None)


def test_explicit_kind_is_kept() -> None:
    parsed = targets.parse_target("aiperfjob/perf/bench-1")
    assert parsed.kind is targets.WorkloadKind.AIPERFJOB
    assert parsed.key == "aiperfjob/perf/bench-1"
    assert parsed.workload_key == "perf/bench-1"


@pytest.mark.parametrize("raw", ["88123", "slurm:88123", "SLURM:88123"])
def test_numbers_are_slurm_jobs(raw: str) -> None:
    parsed = targets.parse_target(raw)
    assert parsed.platform is targets.Platform.SLURM
    assert parsed.key == "slurm:88123"


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "a;b/c",
        "../etc/passwd",
        "ns/Name",
        "x/y/z/w",
        "service/ns/a",
        "slurm:12a",
        "0",
        "ns/a\nb",
        "ns/ａ",
    ],
)
def test_anything_else_is_refused_with_the_accepted_forms(raw: str) -> None:
    with pytest.raises(targets.InvalidTarget) as error:
        targets.parse_target(raw)
    assert "Accepted forms" in str(error.value) or "Missing" in str(error.value)
