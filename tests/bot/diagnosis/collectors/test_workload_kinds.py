"""Every workload kind resolves to its own pods through owner references and selectors, never a sweep."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.diagnosis.collectors.kube.kinds import KINDS, LOOKUP_ORDER
from bot.diagnosis.collectors.kube.workloads import cron_job_name
from bot.diagnosis.service import TargetNotFound, diagnose
from bot.evidence.targets import WorkloadKind
from bot.lab import objects as o
from bot.lab.kube_api import ClusterState
from tests.support.kube_lab import running_lab

NS = "team"
CONTAINER = o.container(name="main", image="nvcr.io/nvidia/pytorch:24.05-py3", gpus=1, memory="8Gi")
TEMPLATE = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [CONTAINER], "restartPolicy": "Always"}}


def _custom(kind: WorkloadKind, **status: Any) -> dict[str, Any]:
    spec = KINDS[kind]
    return o.custom(api_version=f"{spec.group}/{spec.versions[0]}", kind=spec.title.replace("Volcano ", ""),
                    namespace=NS, name="w", spec={}, status=status)


def _pod(state: ClusterState, *, name: str, labels: dict[str, str], owner: dict[str, Any] | None) -> None:
    state.add(o.pod(namespace=NS, name=name, node_name="gpu-node-01", containers=[CONTAINER], labels=labels,
                    owner=o.owner_ref(owner) if owner else None, restart_policy="Always"))


def _cluster(kind: WorkloadKind) -> ClusterState:
    """One workload of `kind` named `w` with one pod of its own, and a decoy pod with the same labels it does not own."""
    state = ClusterState()
    state.add(o.namespace(NS))
    state.add(o.node(name="gpu-node-01", ip="10.0.1.11"))
    spec = KINDS[kind]
    labels = {label: "w" for label in spec.labels[:1]}
    owner: dict[str, Any]
    if kind is WorkloadKind.JOB:
        owner = o.job(namespace=NS, name="w", template=TEMPLATE)
    elif kind is WorkloadKind.DEPLOYMENT:
        deployment = o.deployment(namespace=NS, name="w", template=TEMPLATE, replicas=1, ready=1)
        state.add(deployment)
        owner = o.replicaset(owner=deployment, template_hash="5d8f7c6b9", revision=1, replicas=1, ready=1)
        state.add(owner)
        labels = owner["metadata"]["labels"]
    elif kind is WorkloadKind.STATEFULSET:
        owner = o.statefulset(namespace=NS, name="w", template=TEMPLATE, replicas=1, ready=1)
        labels = dict(TEMPLATE["metadata"]["labels"])
    elif kind is WorkloadKind.REPLICASET:
        deployment = o.deployment(namespace=NS, name="d", template=TEMPLATE, replicas=1, ready=1)
        owner = o.replicaset(owner=deployment, template_hash="w", revision=1, replicas=1, ready=1)
        owner["metadata"]["name"] = "w"
        labels = owner["metadata"]["labels"]
    elif kind is WorkloadKind.DAEMONSET:
        owner = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": o.meta(name="w", namespace=NS, labels={"app": "w"}, kind="DaemonSet"),
                 "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": TEMPLATE},
                 "status": {"currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberMisscheduled": 0,
                            "numberReady": 1}}
        labels = {"app": "w"}
    elif kind is WorkloadKind.CRONJOB:
        cron = o.cronjob(namespace=NS, name="w", job_template={"template": TEMPLATE}, schedule="*/5 * * * *",
                         last_schedule_ago=120 + o.NOW.second, last_success_ago=120 + o.NOW.second)
        state.add(cron)
        scheduled = datetime.fromisoformat(cron["status"]["lastScheduleTime"])
        owner = o.job(namespace=NS, name=cron_job_name(cronjob="w", scheduled=scheduled), template=TEMPLATE)
        owner["metadata"]["ownerReferences"] = [{**o.owner_ref(cron), "controller": True}]
        labels = {"batch.kubernetes.io/job-name": owner["metadata"]["name"]}
    elif kind is WorkloadKind.RAYJOB:
        owner = _custom(kind, rayClusterName="w-raycluster", jobDeploymentStatus="Running", jobStatus="RUNNING")
        labels = {"ray.io/cluster": "w-raycluster"}
    elif kind is WorkloadKind.POD:
        state.add(o.pod(namespace=NS, name="w", node_name="gpu-node-01", containers=[CONTAINER]))
        return state
    else:
        owner = _custom(kind)
    if state.get(group=spec.group if kind is not WorkloadKind.CRONJOB else "batch",
                 plural=spec.plural if kind is not WorkloadKind.CRONJOB else "jobs", namespace=NS,
                 name=owner["metadata"]["name"]) is None:
        state.add(owner)
    _pod(state, name="w-own-0", labels=labels, owner=owner)
    decoy = o.job(namespace=NS, name="someone-else", template=TEMPLATE)
    state.add(decoy)
    _pod(state, name="w-decoy-0", labels=labels, owner=decoy)
    return state


@pytest.mark.parametrize("kind", list(WorkloadKind))
def test_every_kind_resolves_by_its_id_to_its_own_pods(kind: WorkloadKind, tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_cluster(kind)) as lab:
        report = diagnose(target=f"{kind.value}/{NS}/w", settings=lab.settings())
        requests = [(record.path, record.query) for record in lab.server.requests]
    assert report.target_kind == kind.value
    pods = {item.subject.rsplit("/", 1)[-1] for item in report.observations if item.kind == "pod_phase"}
    if kind is WorkloadKind.POD:
        assert pods == {"w"}
    elif KINDS[kind].owned:
        assert pods == {"w-own-0"}, "its own pods, not a look-alike's"
    else:
        assert "w-own-0" in pods, "found by the label only its controller sets"
    assert not [path for path, query in requests if path in ("/api/v1/pods", "/api/v1/nodes")
                or path.endswith("/events") and "involvedObject.name" not in query
                or path.endswith("/pods") and "Selector=" not in query], "targeted reads only"
    assert report.verdict.layer is None


def test_namespace_slash_name_tries_the_common_kinds_in_a_fixed_bounded_order(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_cluster(WorkloadKind.DEPLOYMENT)) as lab:
        report = diagnose(target=f"{NS}/w", settings=lab.settings())
        tried = [record.path.rsplit("/", 2)[-2] for record in lab.server.requests if record.path.endswith("/w")]
    assert report.target_kind == "deployment"
    assert tried == ["jobs", "jobsets", "pytorchjobs", "aiperfjobs", "deployments"]


def test_a_name_no_kind_has_lists_what_was_tried_and_how_to_name_a_custom_resource(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_cluster(WorkloadKind.JOB)) as lab:
        with pytest.raises(TargetNotFound, match=r"plural\.group/namespace/name") as error:
            diagnose(target=f"{NS}/nothing", settings=lab.settings())
        gets = [record for record in lab.server.requests if record.path.endswith("/nothing")]
    assert len(gets) <= len(LOOKUP_ORDER) + 1
    assert "no " in str(error.value) and "namespace team" in str(error.value)


def test_a_custom_resource_is_found_through_discovery_by_plural_singular_or_kind(tmp_path: Path) -> None:
    state = ClusterState()
    state.add(o.namespace("serving"))
    state.add(o.custom(api_version="serving.example.com/v1", kind="ModelServer", namespace="serving", name="m",
                       spec={}, status={"selector": "app=m"}))
    for raw in ("modelservers.serving.example.com", "modelserver.serving.example.com"):
        with running_lab(tmp_path=tmp_path, state=state) as lab:
            report = diagnose(target=f"{raw}/serving/m", settings=lab.settings())
        assert report.target_kind == "modelservers.serving.example.com"
        missing = next(item for item in report.observations if item.kind == "pods_not_found")
        assert "a bounded read cannot search a namespace by owner reference" in missing.text
        assert report.verdict.layer is None


def test_a_custom_resource_of_a_group_the_cluster_does_not_serve_is_not_found(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, state=_cluster(WorkloadKind.JOB)) as lab, pytest.raises(TargetNotFound):
        diagnose(target=f"notebooks.kubeflow.example/{NS}/w", settings=lab.settings())


def test_a_cronjobs_run_is_named_by_its_scheduled_minute_as_the_controller_names_it() -> None:
    scheduled = datetime(2024, 1, 1, 2, 0, tzinfo=UTC)
    assert cron_job_name(cronjob="nightly", scheduled=scheduled) == "nightly-28401240"


def test_a_container_that_never_started_is_named_and_its_log_never_requested(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="image-tag-missing") as lab:
        report = diagnose(target="ml/train-llm", settings=lab.settings())
        logs = [record for record in lab.server.requests if record.path.endswith("/log")]
    assert logs == []
    skipped = [item for item in report.observations if item.kind == "log_skipped"]
    assert len(skipped) == 2 and all("never started (waiting: ErrImagePull)" in item.text for item in skipped)
    assert {item.outcome.value for item in report.collectors if item.name == "logs"} == {"ok"}


def test_an_init_containers_previous_log_is_read_while_the_main_container_waits(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="init-model-download") as lab:
        diagnose(target="deployment/serving/llama-8b", settings=lab.settings())
        logs = [record.query for record in lab.server.requests if record.path.endswith("/log")]
    assert logs and all("container=model-download" in query for query in logs)
    assert any("previous=true" in query for query in logs)


def test_a_pending_pod_is_followed_one_hop_to_its_claimed_node_and_the_gpu_operator_there(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="pending-node-no-driver") as lab:
        report = diagnose(target="ml/train-llm", settings=lab.settings())
        paths = [(record.path, record.query) for record in lab.server.requests]
    assert ("/apis/karpenter.sh/v1/nodeclaims/gpu-h100-x7k2p", "") in paths
    assert [path for path, _ in paths].count("/api/v1/nodes/gpu-node-13") == 1, "one node read once"
    assert ("/api/v1/namespaces/gpu-operator/pods", "fieldSelector=spec.nodeName%3Dgpu-node-13&limit=50") in paths
    assert any("nodeclaim/gpu-h100-x7k2p" in line and "gpu-node-13" in line for line in report.followed)
    assert any(line.startswith("GPU operator pods on node/gpu-node-13") for line in report.followed)
    assert report.to_dict()["followed"] == list(report.followed)


def test_a_jobs_request_count_stays_within_twice_what_it_was(tmp_path: Path) -> None:
    # Before issue 13 the crash-looping Job of the `crashloop` scenario took 11 requests.
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        diagnose(target="ml/train-llm", settings=lab.settings())
        count = len(lab.server.requests)
    assert count <= 22, count


def test_a_crash_looping_sidecar_is_observed_as_a_sidecar_and_its_previous_log_read(tmp_path: Path) -> None:
    state = ClusterState()
    state.add(o.namespace(NS))
    state.add(o.node(name="gpu-node-01", ip="10.0.1.11"))
    proxy = {**o.container(name="proxy", image="envoyproxy/envoy:v1.31", memory="256Mi", cpu="100m"),
             "restartPolicy": "Always"}
    state.add(o.pod(namespace=NS, name="w", node_name="gpu-node-01", containers=[CONTAINER], init_containers=[proxy],
                    restart_policy="Always",
                    init_states={"proxy": o.waiting("CrashLoopBackOff", "back-off 40s")},
                    init_last_states={"proxy": o.terminated(reason="Error", exit_code=1, ago=30)},
                    init_restarts={"proxy": 3}))
    state.add_log(namespace=NS, pod="w", container="proxy", previous=True,
                  text="[critical][main] error initializing configuration '/etc/envoy/envoy.yaml': missing cluster\n")
    with running_lab(tmp_path=tmp_path, state=state) as lab:
        report = diagnose(target=f"pod/{NS}/w", settings=lab.settings())
        logs = [record.query for record in lab.server.requests if record.path.endswith("/log")]
    sidecar = next(item for item in report.observations if item.kind == "container_state"
                   and item.fields["container"] == "proxy")
    assert sidecar.fields["role"] == "sidecar" and sidecar.text.startswith("sidecar container proxy waiting")
    assert any("container=proxy" in query and "previous=true" in query for query in logs)
    assert any(item.kind == "log_line" and "missing cluster" in item.text for item in report.observations)
    health = next(item for item in report.observations if item.kind == "target_health")
    assert health.fields["healthy"] is False and any("sidecar container proxy" in p for p in health.fields["problems"])
