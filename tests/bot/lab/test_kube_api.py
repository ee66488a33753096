"""The lab API server speaks the wire format the real client and kubectl expect."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from bot.lab import objects as o
from bot.lab.kube_api import ClusterState, KubeApiServer, label_matcher
from tests.support.kube_lab import running_lab

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _get(server: KubeApiServer, path: str, *, accept: str = "application/json") -> tuple[int, Any]:
    request = urllib.request.Request(server.url + path, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read().decode()
            return response.status, json.loads(body) if "json" in response.headers["Content-Type"] else body
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read().decode())


def _api(kubeconfig: Path) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def _many_pods(count: int) -> ClusterState:
    state = ClusterState()
    for index in range(count):
        state.add(o.pod(namespace="bulk", name=f"p-{index:05d}", node_name="n1",
                        containers=[o.container(name="c", image="busybox:1.36")],
                        labels={"app": "even" if index % 2 == 0 else "odd", "tier": str(index % 3)}))
    return state


def test_discovery_names_core_and_installed_crd_groups_only(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="kueue-not-installed") as lab:
        _, core = _get(lab.server, "/api/v1")
        _, groups = _get(lab.server, "/apis")
        status, missing = _get(lab.server, "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads")
    assert {"pods", "pods/log", "nodes", "events"} <= {item["name"] for item in core["resources"]}
    assert "aiperf.nvidia.com" in {group["name"] for group in groups["groups"]}
    assert "kueue.x-k8s.io" not in {group["name"] for group in groups["groups"]}
    assert status == 404 and missing["kind"] == "Status" and missing["reason"] == "NotFound"


def test_paging_with_limit_and_continue_returns_every_item_once(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_many_pods(1001)) as lab:
        core = client.CoreV1Api(_api(lab.kubeconfig))
        names, token, pages = [], None, 0
        while True:
            page = core.list_namespaced_pod("bulk", limit=100, _continue=token)
            names += [pod.metadata.name for pod in page.items]
            pages += 1
            token = page.metadata._continue
            if not token:
                break
    assert pages == 11
    assert len(names) == len(set(names)) == 1001


def test_label_and_field_selectors_filter_on_the_server(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_many_pods(30)) as lab:
        core = client.CoreV1Api(_api(lab.kubeconfig))
        even = core.list_namespaced_pod("bulk", label_selector="app=even,tier in (0,1)")
        named = core.list_namespaced_pod("bulk", field_selector="metadata.name=p-00007")
    assert {pod.metadata.labels["app"] for pod in even.items} == {"even"}
    assert {pod.metadata.labels["tier"] for pod in even.items} == {"0", "1"}
    assert [pod.metadata.name for pod in named.items] == ["p-00007"]


def test_label_matcher_understands_set_and_existence_terms() -> None:
    matches = label_matcher("a notin (x, y),!b,c")
    assert matches({"a": "z", "c": "1"})
    assert not matches({"a": "x", "c": "1"})
    assert not matches({"a": "z", "b": "1", "c": "1"})


def test_events_are_found_by_involved_object_name(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="gpu-xid") as lab:
        core = client.CoreV1Api(_api(lab.kubeconfig))
        events = core.list_event_for_all_namespaces(
            field_selector="involvedObject.kind=Node,involvedObject.name=gpu-node-05,type=Warning")
    assert {event.reason for event in events.items} == {"XidError", "GPUUnhealthy"}


def test_pod_logs_honour_tail_lines_limit_bytes_and_previous(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        core = client.CoreV1Api(_api(lab.kubeconfig))
        tail = core.read_namespaced_pod_log("train-llm-0-x0k2p", "ml", container="trainer", previous=True,
                                            tail_lines=2)
        capped = core.read_namespaced_pod_log("train-llm-0-x0k2p", "ml", container="trainer", previous=True,
                                              limit_bytes=40)
        current = core.read_namespaced_pod_log("train-llm-0-x0k2p", "ml", container="trainer")
        with pytest.raises(ApiException) as missing:
            core.read_namespaced_pod_log("train-llm-ok-0-x0k2p", "ml", container="trainer", previous=True)
    assert tail.splitlines() == ["    from flash_attn import flash_attn_func",
                                 "ModuleNotFoundError: No module named 'flash_attn'"]
    assert len(capped.encode()) == 40 and capped.startswith("step 0")
    assert current == "starting\n"
    assert missing.value.status == 400


def test_injected_errors_and_the_request_log(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy") as lab:
        lab.server.inject(path_pattern=r"/nodes$", status=500, times=1)
        lab.server.inject(path_pattern=r"/namespaces/ml/pods", status=403)
        core = client.CoreV1Api(_api(lab.kubeconfig))
        with pytest.raises(ApiException) as server_error:
            core.list_node()
        assert len(core.list_node().items) == 16
        with pytest.raises(ApiException) as forbidden:
            core.list_namespaced_pod("ml")
        logged = [(record.path, record.status) for record in lab.server.requests]
    assert server_error.value.status == 500
    assert forbidden.value.status == 403 and json.loads(forbidden.value.body)["reason"] == "Forbidden"
    assert logged == [("/api/v1/nodes", 500), ("/api/v1/nodes", 200), ("/api/v1/namespaces/ml/pods", 403)]


def test_table_responses_carry_kubectl_columns_and_rows(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        status, table = _get(lab.server, "/api/v1/namespaces/ml/pods?labelSelector=job-name%3Dtrain-llm",
                             accept=TABLE)
    assert status == 200 and table["kind"] == "Table"
    assert [column["name"] for column in table["columnDefinitions"]][:5] == [
        "Name", "Ready", "Status", "Restarts", "Age"]
    rows = {row["cells"][0]: row["cells"] for row in table["rows"]}
    assert rows["train-llm-0-x0k2p"][2] == "CrashLoopBackOff" and rows["train-llm-0-x0k2p"][3] == 7
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_the_server_is_read_only(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy") as lab:
        request = urllib.request.Request(lab.server.url + "/api/v1/namespaces/ml/pods", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 405


def test_a_missing_object_is_a_not_found_status_naming_it(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy") as lab:
        status, body = _get(lab.server, "/apis/batch/v1/namespaces/ml/jobs/nope")
    assert status == 404 and body["details"]["name"] == "nope" and body["reason"] == "NotFound"
