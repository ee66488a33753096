"""The lab's stand-in objects carry what a real API server fills: the real client's strict models accept them.

The snapshot reads wire JSON without building the client's typed models (start-up cost), so this is where the
stand-ins are held to those models instead.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from bot.lab import scenarios

MODELS = {("", "pods"): "V1Pod", ("", "nodes"): "V1Node", ("", "events"): "CoreV1Event",
          ("apps", "deployments"): "V1Deployment", ("apps", "replicasets"): "V1ReplicaSet",
          ("apps", "statefulsets"): "V1StatefulSet", ("apps", "daemonsets"): "V1DaemonSet",
          ("batch", "jobs"): "V1Job", ("batch", "cronjobs"): "V1CronJob"}


def _strict(obj: dict, model: str) -> object:
    return client.ApiClient().deserialize(response_text=json.dumps(obj), response_type=model,
                                          content_type="application/json")


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_every_built_in_object_of_every_scenario_is_accepted_by_the_real_clients_models(name: str) -> None:
    state = scenarios.build(name).state
    checked = 0
    for group, plural in state.served_resources():
        model = MODELS.get((group, plural))
        if model is None:
            continue
        for obj in state.listing(group=group, plural=plural, namespace=None):
            parsed = _strict(obj, model)
            assert parsed.metadata.name == obj["metadata"]["name"]
            checked += 1
    assert checked >= 40, "a busy cluster's pods, nodes and events were all checked"


def test_a_stand_in_pod_missing_what_the_server_fills_is_refused_by_the_models() -> None:
    pod = scenarios.build("oom").state.listing(group="", plural="pods", namespace=None)[0]
    broken = json.loads(json.dumps(pod))
    del broken["spec"]["containers"][0]["name"]
    with pytest.raises(ValueError):
        _strict(broken, "V1Pod")
