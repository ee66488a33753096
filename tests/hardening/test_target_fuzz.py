"""Fuzzing `/triage job <id>`: any string parses into a grammar-clean Target or is refused clearly."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.evidence import targets

NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
SLURM_ID = re.compile(r"[1-9][0-9]{0,9}(_[0-9]{1,6})?")
SAFE_KEY = re.compile(r"[a-z0-9./:_-]+")
RESOURCE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){2,}")

SHELL_METACHARACTERS = list(";|&$`(){}<>*?!~'\"\\#=%^[] \t")
LOOK_ALIKES = [
    "\uff41",  # fullwidth a
    "\u0430",  # Cyrillic a
    "\u043e",  # Cyrillic o
    "\u03bf",  # Greek omicron
    "\u0131",  # dotless i
    "\u0130",  # I with dot: lowercases to two code points
    "\u212a",  # Kelvin sign: lowercases to ASCII k
    "\ufb01",  # fi ligature
    "\u2215",  # division slash
    "\uff0f",  # fullwidth solidus
    "\u0660",  # Arabic-Indic zero: isdigit() but not ASCII
    "\u00b9",  # superscript one: isdigit() too
    "\u200b",  # zero-width space
    "\u202e",  # right-to-left override
    "\u3000",  # ideographic space
    "\x00",
    "\x1b[31m",
]
HOSTILE_FRAGMENTS = [
    *SHELL_METACHARACTERS,
    *LOOK_ALIKES,
    "../",
    "..",
    "/",
    "\n",
    "\r\n",
    "$(id)",
    "`id`",
    "slurm:",
]

_dns_label = st.from_regex(NAMESPACE, fullmatch=True)
_dns_name = st.from_regex(
    r"[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?){0,3}", fullmatch=True
)
_fragment = st.one_of(st.sampled_from(HOSTILE_FRAGMENTS), _dns_label, st.text(max_size=8))
_hostile = st.lists(_fragment, max_size=12).map("".join)
_any_input = st.one_of(
    st.text(max_size=400), _hostile, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))
)


def _assert_grammar_clean(parsed: targets.Target) -> None:
    if parsed.platform is targets.Platform.SLURM:
        assert SLURM_ID.fullmatch(parsed.name)
        assert parsed.namespace is None and parsed.kind is None
    else:
        assert parsed.namespace is not None and NAMESPACE.fullmatch(parsed.namespace)
        assert len(parsed.name) <= 253 and NAME.fullmatch(parsed.name)
        assert parsed.kind is None or isinstance(parsed.kind, targets.WorkloadKind)
        assert parsed.resource is None or (parsed.kind is None and len(parsed.resource) <= 253
                                           and RESOURCE.fullmatch(parsed.resource))
    assert SAFE_KEY.fullmatch(parsed.key)
    assert ".." not in parsed.key


def _assert_actionable(error: targets.InvalidTarget) -> None:
    message = str(error)
    assert message
    assert "Accepted forms" in message or "Missing job id" in message or "at most" in message
    # Whatever the user typed is echoed as printable ASCII only: no newline, escape or look-alike reaches Slack.
    assert all(32 <= ord(ch) < 127 for ch in message), message
    assert len(message) < 1000


def _parse_or_refuse(raw: str) -> targets.Target | None:
    try:
        parsed = targets.parse_target(raw)
    except targets.InvalidTarget as error:
        _assert_actionable(error)
        return None
    _assert_grammar_clean(parsed)
    return parsed


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_any_input)
@example(raw="")
@example(raw=" \t\n ")
@example(raw="x" * 10_240)
@example(raw="ml/" + "a" * 10_240)
@example(raw="ml/train; rm -rf /")
@example(raw="ml/$(curl evil)")
@example(raw="../../etc/passwd")
@example(raw="ml/train\nslurm:1")
@example(raw="job/\u212aube/train")
@example(raw="\u0661\u0662\u0663")
@example(raw="deploy/serving/vllm; id")
@example(raw="notebooks.kubeflow.org/team/$(id)")
@example(raw="notebooks.kubeflow.org/team/nb/../x")
@example(raw="../kubeflow.org/team/nb")
@example(raw="\u212aubeflow.example.org/team/nb")
@example(raw="lws/ml/" + "a" * 300)
@example(raw="slurm:\u00b9\u00b2")
def test_any_input_parses_cleanly_or_is_refused_with_an_actionable_message(raw: str) -> None:
    _parse_or_refuse(raw)


@settings(max_examples=500)
@given(prefix=_hostile, raw=_any_input)
def test_a_parsed_target_round_trips_through_its_canonical_key(prefix: str, raw: str) -> None:
    for candidate in (raw, prefix + raw):
        parsed = _parse_or_refuse(candidate)
        if parsed is not None:
            assert targets.parse_target(parsed.key) == parsed


@settings(max_examples=500)
@given(
    namespace=_dns_label,
    name=_dns_name,
    kind=st.sampled_from([None, *targets.WorkloadKind]),
    padding=st.sampled_from(["", " ", "\t", "  \n"]),
)
def test_every_well_formed_kubernetes_id_is_accepted_as_typed(
    namespace: str, name: str, kind: targets.WorkloadKind | None, padding: str
) -> None:
    raw = f"{kind.value}/{namespace}/{name}" if kind else f"{namespace}/{name}"
    parsed = targets.parse_target(padding + raw + padding)
    assert (parsed.platform, parsed.namespace, parsed.name, parsed.kind) == (
        targets.Platform.KUBERNETES,
        namespace,
        name,
        kind,
    )


@settings(max_examples=500)
@given(
    alias=st.sampled_from(sorted(targets.KIND_ALIASES)),
    namespace=_dns_label,
    name=_dns_name,
    upper=st.booleans(),
)
def test_every_kubectl_short_name_is_accepted_and_stored_under_its_full_kind(
    alias: str, namespace: str, name: str, upper: bool
) -> None:
    parsed = targets.parse_target(f"{alias.upper() if upper else alias}/{namespace}/{name}")
    assert parsed.kind is targets.KIND_ALIASES[alias]
    assert parsed.key == f"{parsed.kind.value}/{namespace}/{name}"
    assert targets.parse_target(parsed.key) == parsed


@settings(max_examples=500)
@given(
    plural=_dns_label,
    group=st.lists(_dns_label, min_size=2, max_size=4).map(".".join),
    namespace=_dns_label,
    name=_dns_name,
)
def test_a_custom_resource_is_accepted_as_plural_dot_group_and_never_as_a_known_kind(
    plural: str, group: str, namespace: str, name: str
) -> None:
    resource = f"{plural}.{group}"
    if len(resource) > 253:
        return
    parsed = targets.parse_target(f"{resource}/{namespace}/{name}")
    assert (parsed.kind, parsed.resource, parsed.namespace, parsed.name) == (None, resource, namespace, name)
    assert targets.parse_target(parsed.key) == parsed


@pytest.mark.parametrize("raw", ["apps/ns/name", "batch.io/ns/name", "deployments/ns/name", "../ns/name",
                                 "notebooks.kubeflow.org./ns/name", "-x.kubeflow.org/ns/name"])
def test_a_kind_that_is_neither_known_nor_plural_dot_group_is_refused_with_every_form(raw: str) -> None:
    with pytest.raises(targets.InvalidTarget, match="Accepted forms") as error:
        targets.parse_target(raw)
    assert "deployment" in str(error.value) and "plural.group" in str(error.value)


@settings(max_examples=300)
@given(number=st.integers(min_value=1, max_value=9_999_999_999), index=st.none() | st.integers(0, 999_999))
def test_every_well_formed_slurm_id_is_accepted(number: int, index: int | None) -> None:
    raw = f"{number}" if index is None else f"{number}_{index}"
    assert targets.parse_target(raw).name == raw
    assert targets.parse_target(f"slurm:{raw}").name == raw


@settings(max_examples=800)
@given(
    namespace=_dns_label,
    name=_dns_name,
    hostile=st.sampled_from([f for f in HOSTILE_FRAGMENTS if f not in ("/", "slurm:")]),
    where=st.sampled_from(["namespace", "name", "end"]),
)
def test_a_hostile_fragment_inside_a_valid_id_is_always_refused(
    namespace: str, name: str, hostile: str, where: str
) -> None:
    if where == "namespace":
        raw = f"{namespace}{hostile}x/{name}"
    elif where == "name":
        raw = f"{namespace}/{name}{hostile}x"
    else:
        raw = f"{namespace}/{name}{hostile}x"
    with pytest.raises(targets.InvalidTarget) as error:
        targets.parse_target(raw)
    _assert_actionable(error.value)


@pytest.mark.parametrize("raw", ["0/0", "42-team/train-7", "job/7ns/bench-1"])
def test_a_namespace_that_starts_with_a_digit_is_kubernetes_not_slurm(raw: str) -> None:
    assert targets.parse_target(raw).platform is targets.Platform.KUBERNETES


@pytest.mark.parametrize("size", [301, 10_240, 1_000_000])
def test_oversized_ids_are_refused_by_length_before_any_pattern_runs(size: int) -> None:
    with pytest.raises(targets.InvalidTarget, match=r"at most 300"):
        targets.parse_target("a" * size)
