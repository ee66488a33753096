"""The k8s-debug node probe creates pods: the chart grants that only when asked, in one namespace, and says so."""

from __future__ import annotations

import pytest

from tests.helm.chart import NAMESPACE, Helm, env_of, of_kind, only, parse_manifests
from tests.helm.rbac_grants import grants_from_rules

pytestmark = pytest.mark.helm

PROBING = {"nodeProbe": {"runner": "k8s-debug", "image": "nvcr.io/nvidia/doca/ibstat:1", "rbac": {"create": True}}}


def _probe_roles(docs: list[dict]) -> list[dict]:
    return [doc for doc in of_kind(docs=docs, kind="Role") if doc["metadata"]["name"].endswith("-node-probe")]


def test_by_default_no_probe_runs_and_nothing_may_create_pods(helm: Helm) -> None:
    docs = parse_manifests(text=helm.template())
    assert _probe_roles(docs) == []
    for role in of_kind(docs=docs, kind="ClusterRole") + of_kind(docs=docs, kind="Role"):
        assert {grant.verb for grant in grants_from_rules(rules=role["rules"])} <= {"get", "list", "watch"}
    container = only(docs=docs, kind="Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert env_of(container=container)["TRIAGE_NODE_PROBE_RUNNER"]["value"] == "off"


def test_the_opt_in_grants_pod_create_and_delete_in_the_probe_namespace_only(helm: Helm) -> None:
    docs = parse_manifests(text=helm.template(values=PROBING))
    (role,) = _probe_roles(docs)
    assert role["metadata"]["namespace"] == NAMESPACE
    grants = {(grant.resource, grant.verb) for grant in grants_from_rules(rules=role["rules"])}
    assert grants == {
        ("pods", "create"), ("pods", "delete"), ("pods", "get"), ("pods", "list"), ("pods", "watch"),
        ("pods/attach", "create"), ("pods/attach", "get"), ("pods/log", "get"),
    }
    (binding,) = [doc for doc in of_kind(docs=docs, kind="RoleBinding") if doc["roleRef"]["name"] == role["metadata"]["name"]]
    assert binding["subjects"][0]["kind"] == "ServiceAccount"
    # The cluster-wide role stays read-only.
    cluster = only(docs=docs, kind="ClusterRole")
    assert {grant.verb for grant in grants_from_rules(rules=cluster["rules"])} == {"get", "list", "watch"}
    container = only(docs=docs, kind="Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = env_of(container=container)
    assert env["TRIAGE_NODE_PROBE_RUNNER"]["value"] == "k8s-debug"
    assert env["TRIAGE_NODE_PROBE_IMAGE"]["value"] == "nvcr.io/nvidia/doca/ibstat:1"
    assert env["TRIAGE_NODE_PROBE_NAMESPACE"]["value"] == NAMESPACE


def test_k8s_debug_without_a_probe_image_is_refused_with_what_to_set(helm: Helm) -> None:
    result = helm.template_result(values={"nodeProbe": {"runner": "k8s-debug"}})
    assert result.returncode != 0 and "nodeProbe.image" in result.stderr


def test_an_unknown_runner_is_refused_by_the_schema(helm: Helm) -> None:
    result = helm.template_result(values={"nodeProbe": {"runner": "ssh"}})
    assert result.returncode != 0 and "nodeProbe.runner" in result.stderr
