"""The chart's RBAC grants every API call the collectors make on every lab scenario.

Each scenario's cluster is served by the lab API server, which logs every request; the real snapshot engine
(`bot.diagnosis.service.diagnose`) runs against it for the failing target and its healthy sibling. Each logged
request is mapped to the (apiGroup, resource, verb) RBAC would check. A collector that starts reading a new
resource fails this test until the chart grants it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.helm.chart import Helm, of_kind, only, parse_manifests
from tests.helm.rbac_grants import access_for_request, grants_from_rules, ungranted_requests

pytestmark = pytest.mark.helm


def _import(name: str) -> ModuleType:
    """Modules from branch `snapshot`; skip precisely when they are not there."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        pytest.skip(
            f"{name} (lab API server / snapshot engine from branch `snapshot`) is not importable: {error}"
        )


@pytest.fixture(scope="module")
def lab_request_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, str]]]:
    """Scenario name -> every (method, path?query) the snapshot engine sent to that scenario's lab cluster."""
    scenarios = _import("bot.lab.scenarios")
    kube_api = _import("bot.lab.kube_api")
    diagnose = _import("bot.diagnosis.service")
    config = _import("bot.config")
    logs: dict[str, list[tuple[str, str]]] = {}
    for name in scenarios.SCENARIOS:
        scenario = scenarios.build(name)
        folder: Path = tmp_path_factory.mktemp(f"lab-{name}")
        with kube_api.KubeApiServer(state=scenario.state) as server:
            settings = config.Settings(
                kubeconfig=server.write_kubeconfig(path=folder / "kubeconfig"),
                kube_context=None,
                in_cluster=False,
            )
            for target in (scenario.target, scenario.healthy_target):
                if not target:
                    continue
                try:
                    diagnose.diagnose(target=target, settings=settings)
                except diagnose.TargetNotFound:
                    pass  # the scenario may model a missing workload; its requests still count
            logs[name] = [
                (record.method, f"{record.path}?{record.query}" if record.query else record.path)
                for record in server.requests
            ]
    return logs


def test_every_lab_scenario_made_api_requests_to_check(
    lab_request_logs: dict[str, list[tuple[str, str]]],
) -> None:
    assert lab_request_logs, "the lab has no scenarios"
    empty = [name for name, requests in lab_request_logs.items() if not requests]
    assert empty == [], "a snapshot that sends nothing checks nothing"
    resources = {
        access.resource
        for requests in lab_request_logs.values()
        for method, path in requests
        if (access := access_for_request(method=method, path=path)) is not None
    }
    assert {"pods", "events", "nodes", "pods/log"} <= resources


def _extra_read_resources() -> list[dict[str, object]]:
    """What an operator adds (`rbac.extraReadResources`) to triage the lab's custom resource the bot has no table
    for; every kind the bot knows is granted by the chart's defaults."""
    return list(_import("bot.lab.scenarios").CUSTOM_READ_RESOURCES)


def test_the_cluster_role_grants_every_request_the_collectors_make(
    helm: Helm, lab_request_logs: dict[str, list[tuple[str, str]]]
) -> None:
    values = {"rbac": {"extraReadResources": _extra_read_resources()}}
    role = only(docs=parse_manifests(text=helm.template(values=values)), kind="ClusterRole")
    grants = grants_from_rules(rules=role["rules"])
    missing = {
        name: problems
        for name, requests in lab_request_logs.items()
        if (problems := ungranted_requests(grants=grants, requests=requests))
    }
    assert missing == {}


def test_without_the_extra_grant_only_the_custom_resource_the_bot_has_no_table_for_is_ungranted(
    helm: Helm, lab_request_logs: dict[str, list[tuple[str, str]]]
) -> None:
    role = only(docs=parse_manifests(text=helm.template()), kind="ClusterRole")
    grants = grants_from_rules(rules=role["rules"])
    missing = {name for name, requests in lab_request_logs.items() if ungranted_requests(grants=grants, requests=requests)}
    assert missing == {"unknown-crd"}


def test_the_collectors_only_read(lab_request_logs: dict[str, list[tuple[str, str]]]) -> None:
    writes = sorted(
        {
            f"{method} {path}"
            for requests in lab_request_logs.values()
            for method, path in requests
            if method != "GET"
        }
    )
    assert writes == []


def test_namespaced_roles_lose_exactly_the_cluster_scoped_reads_the_readme_names(
    helm: Helm, lab_request_logs: dict[str, list[tuple[str, str]]]
) -> None:
    """With Roles in the workload's namespace, only cluster-scoped reads (nodes, Karpenter's node claims,
    cluster-wide lists) go ungranted."""
    lost: set[str] = set()
    for requests in lab_request_logs.values():
        namespaces = sorted(
            {a.namespace for m, p in requests if (a := access_for_request(method=m, path=p)) and a.namespace}
        )
        if not namespaces:
            continue
        docs = parse_manifests(
            text=helm.template(values={"rbac": {"namespaced": True, "namespaces": namespaces,
                                                "extraReadResources": _extra_read_resources()}})
        )
        assert not of_kind(docs=docs, kind="ClusterRole")
        grants_by_namespace = {
            role["metadata"]["namespace"]: grants_from_rules(rules=role["rules"])
            for role in of_kind(docs=docs, kind="Role")
        }
        for method, path in requests:
            access = access_for_request(method=method, path=path)
            if access is None:
                continue
            grants = grants_by_namespace.get(access.namespace or "", frozenset())
            if ungranted_requests(grants=grants, requests=[(method, path)]):
                lost.add(access.resource if access.namespace else f"{access.resource} (cluster-wide)")
    assert lost <= {"nodes (cluster-wide)", "events (cluster-wide)", "nodeclaims (cluster-wide)"}, lost
