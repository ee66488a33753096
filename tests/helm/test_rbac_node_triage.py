"""The chart's ClusterRole grants every read a node triage makes, and node triage only reads.

Each node scenario's lab cluster logs every request; the real node snapshot runs against it.
"""

from __future__ import annotations

import pytest

from bot.config import Settings
from bot.diagnosis.service import diagnose
from bot.lab import kube_api, node_scenarios
from tests.helm.chart import Helm, only, parse_manifests
from tests.helm.rbac_grants import grants_from_rules, ungranted_requests

pytestmark = pytest.mark.helm


@pytest.fixture(scope="module")
def node_request_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, str]]]:
    logs = {}
    for name, factory in node_scenarios.NODE_SCENARIOS.items():
        scenario = factory()
        with kube_api.KubeApiServer(state=scenario.state) as server:
            folder = tmp_path_factory.mktemp(f"lab-{name}")
            settings = Settings(kubeconfig=server.write_kubeconfig(path=folder / "kubeconfig"), kube_context=None,
                                in_cluster=False)
            diagnose(target=scenario.target, settings=settings)
            logs[name] = [(record.method, f"{record.path}?{record.query}" if record.query else record.path)
                          for record in server.requests]
    return logs


def test_the_cluster_role_grants_every_node_triage_read(
    helm: Helm, node_request_logs: dict[str, list[tuple[str, str]]]
) -> None:
    role = only(docs=parse_manifests(text=helm.template()), kind="ClusterRole")
    grants = grants_from_rules(rules=role["rules"])
    missing = {name: problems for name, requests in node_request_logs.items()
               if (problems := ungranted_requests(grants=grants, requests=requests))}
    assert missing == {}
    assert all(requests for requests in node_request_logs.values())


def test_node_triage_only_reads(node_request_logs: dict[str, list[tuple[str, str]]]) -> None:
    assert {method for requests in node_request_logs.values() for method, _ in requests} == {"GET"}
