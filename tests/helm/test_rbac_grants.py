"""The RBAC helpers map API paths to the permission RBAC checks, as the API server does."""

from __future__ import annotations

import pytest

from tests.helm.rbac_grants import (
    ApiAccess,
    Grant,
    access_for_request,
    grants_from_rules,
    is_granted,
    ungranted_requests,
)


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        (
            "GET",
            "/api/v1/namespaces/ml/pods?labelSelector=job-name%3Dtrain&limit=250",
            ApiAccess("", "pods", "list", "ml"),
        ),
        ("GET", "/api/v1/namespaces/ml/pods/train-0", ApiAccess("", "pods", "get", "ml")),
        (
            "GET",
            "/api/v1/namespaces/ml/pods/train-0/log?tailLines=200&limitBytes=16384",
            ApiAccess("", "pods/log", "get", "ml"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ml/events?fieldSelector=involvedObject.name%3Dtrain-0",
            ApiAccess("", "events", "list", "ml"),
        ),
        ("GET", "/api/v1/nodes/gpu-node-7", ApiAccess("", "nodes", "get", None)),
        ("GET", "/api/v1/nodes?limit=250&continue=abc", ApiAccess("", "nodes", "list", None)),
        ("GET", "/api/v1/pods?watch=true", ApiAccess("", "pods", "watch", None)),
        ("GET", "/api/v1/watch/namespaces/ml/pods", ApiAccess("", "pods", "watch", "ml")),
        ("GET", "/apis/batch/v1/namespaces/ml/jobs/train", ApiAccess("batch", "jobs", "get", "ml")),
        (
            "GET",
            "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/big",
            ApiAccess("jobset.x-k8s.io", "jobsets", "get", "ml"),
        ),
        (
            "GET",
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs",
            ApiAccess("kubeflow.org", "pytorchjobs", "list", "ml"),
        ),
        (
            "GET",
            "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cq",
            ApiAccess("kueue.x-k8s.io", "clusterqueues", "get", None),
        ),
        (
            "GET",
            "/apis/aiperf.nvidia.com/v1alpha1/namespaces/perf/aiperfjobs/bench-1/status",
            ApiAccess("aiperf.nvidia.com", "aiperfjobs/status", "get", "perf"),
        ),
        (
            "GET",
            "/apis/events.k8s.io/v1/namespaces/ml/events",
            ApiAccess("events.k8s.io", "events", "list", "ml"),
        ),
        ("GET", "/api/v1/namespaces/ml", ApiAccess("", "namespaces", "get", "ml")),
        ("PUT", "/api/v1/namespaces/ml/finalize", ApiAccess("", "namespaces/finalize", "update", "ml")),
        (
            "POST",
            "/api/v1/namespaces/ml/pods/train-0/exec?command=sh",
            ApiAccess("", "pods/exec", "create", "ml"),
        ),
        ("GET", "/api/v1/namespaces/ml/secrets/slack", ApiAccess("", "secrets", "get", "ml")),
        ("DELETE", "/api/v1/namespaces/ml/pods", ApiAccess("", "pods", "deletecollection", "ml")),
        ("DELETE", "/api/v1/namespaces/ml/pods/train-0", ApiAccess("", "pods", "delete", "ml")),
        ("PATCH", "/apis/batch/v1/namespaces/ml/jobs/train", ApiAccess("batch", "jobs", "patch", "ml")),
    ],
)
def test_a_request_maps_to_the_permission_rbac_checks(method: str, path: str, expected: ApiAccess) -> None:
    assert access_for_request(method=method, path=path) == expected


@pytest.mark.parametrize(
    "path",
    ["/api", "/api/v1", "/apis", "/apis/batch", "/apis/batch/v1", "/version", "/openapi/v2", "/healthz"],
)
def test_discovery_and_non_resource_urls_need_no_resource_grant(path: str) -> None:
    assert access_for_request(method="GET", path=path) is None


def test_rules_expand_into_every_group_resource_verb_combination() -> None:
    rules = [
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["get", "list"]},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
    ]
    assert grants_from_rules(rules=rules) == {
        Grant("", "events", "get"),
        Grant("", "events", "list"),
        Grant("events.k8s.io", "events", "get"),
        Grant("events.k8s.io", "events", "list"),
    }


def test_a_subresource_is_not_granted_by_its_parent_resource() -> None:
    grants = grants_from_rules(rules=[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    assert is_granted(grants=grants, needed=Grant("", "pods", "get"))
    assert not is_granted(grants=grants, needed=Grant("", "pods/log", "get"))
    assert not is_granted(grants=grants, needed=Grant("", "pods/exec", "create"))


def test_wildcards_grant_everything_they_cover() -> None:
    grants = grants_from_rules(rules=[{"apiGroups": ["batch"], "resources": ["*"], "verbs": ["*"]}])
    assert is_granted(grants=grants, needed=Grant("batch", "jobs", "delete"))
    assert not is_granted(grants=grants, needed=Grant("", "pods", "get"))


def test_a_request_log_with_an_ungranted_call_is_reported_by_path_and_permission() -> None:
    grants = grants_from_rules(
        rules=[{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]
    )
    log = [
        ("GET", "/api"),
        ("GET", "/api/v1/namespaces/ml/pods?limit=250"),
        ("GET", "/api/v1/namespaces/ml/pods/a/log?tailLines=10"),
        ("GET", "/api/v1/namespaces/ml/secrets/token"),
        ("GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads?limit=5"),
    ]
    assert ungranted_requests(grants=grants, requests=log) == [
        "GET /api/v1/namespaces/ml/secrets/token -> core/secrets get",
        "GET /apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads -> kueue.x-k8s.io/workloads list",
    ]
