"""The chart's ClusterRole grants every API call the collectors make on every lab scenario, and nothing is missing.

A collector that starts reading a new resource fails this test until the chart's rules grant it.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.helm.chart import Helm, only, parse_manifests
from tests.helm.rbac_grants import grants_from_rules, ungranted_requests

pytestmark = pytest.mark.helm


def _lab() -> Any:
    """The lab API server and scenarios from branch `snapshot`; skip precisely when they are not there yet."""
    try:
        return importlib.import_module("bot.lab.scenarios"), importlib.import_module("bot.lab.kube_api")
    except ImportError as error:
        pytest.skip(f"bot.lab (lab API server + scenarios, branch `snapshot`) is not importable: {error}")


def test_the_cluster_role_grants_every_request_the_collectors_make_in_every_lab_scenario(helm: Helm) -> None:
    scenarios, kube_api = _lab()
    diagnose = pytest.importorskip(
        "bot.diagnose", reason="bot.diagnose (snapshot entry point) not merged yet"
    )
    role = only(docs=parse_manifests(text=helm.template()), kind="ClusterRole")
    grants = grants_from_rules(rules=role["rules"])
    missing: dict[str, list[str]] = {}
    for name in scenarios.SCENARIOS:
        scenario = scenarios.build(name)
        with kube_api.KubeApiServer(state=scenario.state) as server:
            diagnose.run_for_lab(scenario=scenario, server=server)  # adapted at merge time
            requests = [(record.method, f"{record.path}?{record.query}") for record in server.requests]
        assert requests, f"{name}: the snapshot made no API requests, so nothing was checked"
        problems = ungranted_requests(grants=grants, requests=requests)
        if problems:
            missing[name] = problems
    assert missing == {}
