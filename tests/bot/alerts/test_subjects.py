"""Alert labels name a workload or a node, through the same validation as a typed id."""

from __future__ import annotations

import pytest

from bot.alerts.subjects import PodRef, subject_of


@pytest.mark.parametrize(("labels", "key"), [
    ({"namespace": "ml", "job_name": "train-llm", "pod": "train-llm-0-abc"}, "job/ml/train-llm"),
    ({"namespace": "ml", "label_jobset_sigs_k8s_io_jobset_name": "big"}, "jobset/ml/big"),
    ({"namespace": "ml", "label_training_kubeflow_org_job_name": "pt"}, "pytorchjob/ml/pt"),
    ({"namespace": "ml", "owner_kind": "Job", "owner_name": "nightly"}, "job/ml/nightly"),
    ({"namespace": "web", "owner_kind": "ReplicaSet", "owner_name": "frontend-5f7b9c8d4"}, "deployment/web/frontend"),  # the ReplicaSet names its Deployment
    ({"namespace": "web", "created_by_kind": "StatefulSet", "created_by_name": "db"}, "statefulset/web/db"),
    ({"namespace": "web", "deployment": "frontend"}, "deployment/web/frontend"),
    ({"node": "gpu-node-07", "condition": "Ready"}, "node:gpu-node-07"),
    ({"instance": "gpu-node-07:9100"}, "node:gpu-node-07"),
    ({"Hostname": "gpu-node-05", "gpu": "3", "UUID": "GPU-1", "namespace": "ml", "pod": "x-0"}, "node:gpu-node-05"),
])
def test_labels_map_to_the_target_a_responder_would_type(labels: dict[str, str], key: str) -> None:
    subject = subject_of(labels)
    assert subject.target is not None and subject.target.key == key


def test_a_dcgm_alert_keeps_the_gpu_it_names_and_a_rule_can_make_it_a_slurm_node() -> None:
    subject = subject_of({"Hostname": "dgx-017", "gpu": "3", "UUID": "GPU-1", "modelName": "H100"},
                         node_platform="slurm")
    assert subject.target is not None and subject.target.key == "slurm-node:dgx-017"
    assert subject.gpu == {"gpu": "3", "UUID": "GPU-1", "modelName": "H100"}


def test_a_rule_can_point_a_gpu_alert_at_the_workload_using_the_gpu() -> None:
    subject = subject_of({"Hostname": "gpu-node-05", "gpu": "3", "namespace": "ml", "job_name": "t"},
                         prefer="workload")
    assert subject.target is not None and subject.target.key == "job/ml/t"


def test_a_bare_pod_is_handed_back_for_its_owner_to_be_read() -> None:
    assert subject_of({"namespace": "ml", "pod": "train-llm-0-x0k2p"}).pod == PodRef(namespace="ml",
                                                                                      pod="train-llm-0-x0k2p")


@pytest.mark.parametrize(("labels", "reason"), [
    ({"alertname": "Watchdog"}, "no label names"),
    ({"instance": "10.0.1.15:9100"}, "is an address"),
    ({"node": "GPU NODE;reboot"}, "not a Kubernetes node name"),
    ({"namespace": "ml", "job_name": "../etc/passwd"}, "do not name a valid workload"),
    ({"namespace": "ML!", "pod": "x"}, "invalid namespace"),
])
def test_labels_that_name_nothing_valid_say_why(labels: dict[str, str], reason: str) -> None:
    subject = subject_of(labels)
    assert subject.target is None and subject.pod is None and reason in subject.reason
