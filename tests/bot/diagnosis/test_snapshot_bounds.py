"""Every bound, against the lab with the real client: deadline, 500s, 403s, missing CRDs, huge lists and logs."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from bot.config import SnapshotBounds, load_settings
from bot.diagnosis.service import ClusterUnreachable, TargetNotFound, diagnose
from bot.evidence.findings import CollectorOutcome
from bot.lab import objects as o
from bot.lab.kube_api import ClusterState
from tests.support.kube_lab import running_lab


def _outcomes(report) -> dict[str, CollectorOutcome]:
    return {item.name: item.outcome for item in report.collectors}


def _big_job(*, pods: int, log_lines: int = 0) -> ClusterState:
    state = ClusterState()
    state.add(o.node(name="gpu-node-01", ip="10.0.1.11"))
    spec = o.container(name="trainer", image="nvcr.io/nvidia/pytorch:24.05-py3", gpus=1)
    job = o.job(namespace="ml", name="wide", template={"metadata": {}, "spec": {"containers": [spec]}},
                parallelism=pods, active=pods)
    state.add(job)
    for index in range(pods):
        state.add(o.pod(namespace="ml", name=f"wide-{index:05d}", node_name="gpu-node-01", containers=[spec],
                        labels={"batch.kubernetes.io/job-name": "wide"}, owner=o.owner_ref(job),
                        states={"trainer": o.waiting("CrashLoopBackOff")} if index == 0 else None,
                        restarts={"trainer": 2} if index == 0 else None,
                        last_states={"trainer": o.terminated(reason="Error", exit_code=1)} if index == 0 else None))
    if log_lines:
        text = "".join(f"line {i} {'x' * 60}\n" for i in range(log_lines))
        state.add_log(namespace="ml", pod="wide-00000", container="trainer", text=text, previous=True)
        state.add_log(namespace="ml", pod="wide-00000", container="trainer", text=text)
    return state


def test_a_slow_api_hits_the_deadline_and_the_snapshot_still_returns(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        lab.server.inject(path_pattern=r"/log$", latency_seconds=3.0)
        report = diagnose(target="ml/train-llm", settings=lab.settings(deadline_seconds=1.0))
    outcomes = _outcomes(report)
    assert outcomes["workload"] is CollectorOutcome.OK and outcomes["pods"] is CollectorOutcome.OK
    assert outcomes["logs"] is CollectorOutcome.TIMEOUT
    assert any(line.startswith("logs: timeout") for line in report.not_checked)
    assert any(item.kind == "container_termination" for item in report.observations)


def test_a_per_call_timeout_shorter_than_a_slow_answer_is_a_timeout(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="gpu-xid") as lab:
        lab.server.inject(path_pattern=r"/nodes/", latency_seconds=2.0)
        report = diagnose(target="ml/train-llm",
                          settings=lab.settings(deadline_seconds=20, call_timeout_seconds=0.5))
    assert _outcomes(report)["nodes"] is CollectorOutcome.TIMEOUT
    assert _outcomes(report)["logs"] is CollectorOutcome.OK


def test_server_errors_on_events_are_an_error_report_and_the_rest_is_kept(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="oom") as lab:
        lab.server.inject(path_pattern=r"/events$", status=500)
        report = diagnose(target="ml/train-llm", settings=lab.settings())
    assert _outcomes(report)["events"] is CollectorOutcome.ERROR
    assert _outcomes(report)["pods"] is CollectorOutcome.OK
    assert any(item.kind == "collector_incomplete" and item.fields["collector"] == "events"
               for item in report.observations)
    assert any(item.fields.get("reason") == "OOMKilled" for item in report.observations)


def test_rbac_denial_on_pods_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        lab.server.inject(path_pattern=r"/namespaces/ml/pods$", status=403)
        report = diagnose(target="ml/train-llm", settings=lab.settings())
    assert _outcomes(report)["pods"] is CollectorOutcome.FORBIDDEN
    forbidden = [finding for finding in report.findings if finding.rule == "snapshot.forbidden"]
    assert forbidden and "forbidden" in forbidden[0].evidence[0].excerpt
    assert report.to_dict()["findings"][-1]["evidence"][0]["expected"] == "200 OK"


def test_rbac_denial_on_the_workload_itself_returns_a_report(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        lab.server.inject(path_pattern=r"/jobs/train-llm$", status=403)
        report = diagnose(target="job/ml/train-llm", settings=lab.settings())
    assert _outcomes(report) == {"workload": CollectorOutcome.FORBIDDEN}


def test_a_missing_crd_group_is_a_finding(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="kueue-not-installed") as lab:
        report = diagnose(target="ml/train-llm", settings=lab.settings())
    assert _outcomes(report)["kueue"] is CollectorOutcome.SKIPPED
    assert [f.rule for f in report.findings if f.rule.startswith("snapshot.")] == ["snapshot.api_group_missing"]


def test_a_huge_pod_list_is_paged_and_capped(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_big_job(pods=1200)) as lab:
        report = diagnose(target="ml/wide", settings=lab.settings(max_items_per_list=300, page_size=100))
        pod_lists = [parse_qs(r.query) for r in lab.server.requests if r.path == "/api/v1/namespaces/ml/pods"]
    pods = next(item for item in report.collectors if item.name == "pods")
    assert pods.outcome is CollectorOutcome.PARTIAL and pods.truncated and pods.items == 300
    assert len(pod_lists) == 3 and all(query["limit"] == ["100"] for query in pod_lists)
    assert "continue" in pod_lists[1]
    assert len([item for item in report.observations if item.kind == "pod_phase"]) == 300


def test_a_huge_log_is_read_as_a_bounded_tail(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_big_job(pods=1, log_lines=100_000)) as lab:
        report = diagnose(target="ml/wide", settings=lab.settings(max_log_bytes_per_container=4096,
                                                                   max_log_lines_per_container=50))
        log_queries = [parse_qs(r.query) for r in lab.server.requests if r.path.endswith("/log")]
        sent = sum(r.bytes_sent for r in lab.server.requests if r.path.endswith("/log"))
    assert {query["tailLines"][0] for query in log_queries} == {"50"}
    assert {query["limitBytes"][0] for query in log_queries} == {"4096"}
    assert {query["previous"][0] for query in log_queries} == {"true", "false"}
    assert sent <= 2 * 4096
    tails = [item for item in report.observations if item.kind == "log_tail"]
    assert tails and all(item.fields["bytes"] <= 4096 for item in tails)


def test_the_total_evidence_cap_stops_reading_logs(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_big_job(pods=1, log_lines=5000)) as lab:
        report = diagnose(target="ml/wide", settings=lab.settings(max_total_evidence_bytes=8192,
                                                                   max_log_bytes_per_container=50_000))
    kept = sum(len(item.text) for item in report.observations if item.kind.startswith("log_"))
    assert any("total evidence bytes cap reached" in item.detail for item in report.collectors)
    assert any(line.startswith("logs: partial") for line in report.not_checked)
    assert kept < 8192


def test_an_unknown_workload_is_target_not_found(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy") as lab, pytest.raises(TargetNotFound, match="ml"):
        diagnose(target="ml/nope", settings=lab.settings())


def test_a_cluster_that_does_not_answer_is_unreachable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        '{"apiVersion":"v1","kind":"Config","current-context":"x","clusters":[{"name":"x","cluster":'
        f'{{"server":"http://127.0.0.1:{port}"}}}}],"users":[{{"name":"x","user":{{}}}}],'
        '"contexts":[{"name":"x","context":{"cluster":"x","user":"x"}}]}', encoding="utf-8")
    settings = load_settings(KUBECONFIG=str(kubeconfig), bounds=SnapshotBounds(deadline_seconds=5))
    with pytest.raises(ClusterUnreachable):
        diagnose(target="ml/train-llm", settings=settings)


def test_a_restarted_container_without_a_kept_previous_log_is_noted_not_an_error(tmp_path: Path) -> None:
    state = _big_job(pods=1)
    state.add_log(namespace="ml", pod="wide-00000", container="trainer", text="Error: current run failed\n")
    with running_lab(tmp_path=tmp_path, state=state) as lab:
        report = diagnose(target="ml/wide", settings=lab.settings())
    logs = next(item for item in report.collectors if item.name == "logs")
    assert logs.outcome is CollectorOutcome.OK and "no previous log" in logs.detail
    assert any(item.kind == "log_line" and not item.fields["previous"] for item in report.observations)
