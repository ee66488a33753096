"""`triage-bot triage job` with the new id forms: every kind from the terminal, history shown as history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from handlers.main import typer_app
from tests.support.kube_lab import running_lab


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(typer_app(), list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("scenario", "typed", "kind", "layer"), [
    ("vllm-crashloop", "deploy/serving/vllm-llama", "deployment", "workflow"),
    ("statefulset-nfs", "statefulset/serving/triton-ensemble", "statefulset", "fabric"),
    ("cronjob-latest", "cj/ml/nightly-eval", "cronjob", "workflow"),
    ("rayjob-pending", "rayjob/ml/rl-tune", "rayjob", "scheduler"),
    ("inferenceservice-oom", "inferenceservice/serving/llama-isvc", "inferenceservice", "runtime"),
    ("bare-pod", "po/ml/gpu-smoke", "pod", "runtime"),
    ("unknown-crd", "modelservers.serving.example.com/serving/llama-srv", "modelservers.serving.example.com",
     "workflow"),
    ("vllm-crashloop", "serving/vllm-llama", "deployment", "workflow"),
])
def test_each_new_id_form_is_resolved_from_the_terminal(scenario: str, typed: str, kind: str, layer: str,
                                                        tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario=scenario) as lab:
        code, out, err = _run("triage", "job", typed, "--kubeconfig", str(lab.kubeconfig), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["target_kind"] == kind
    assert data["verdict"]["layer"] == layer
    assert "followed" in data and all("current" in item for item in data["findings"])


def test_a_healthy_target_prints_no_current_failure_with_its_history(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy-history") as lab:
        code, text, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(lab.kubeconfig))
        md_code, markdown, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(lab.kubeconfig),
                                    "--format", "markdown")
    assert code == md_code == 0
    assert "verdict: no current failure" in text and "(history)" in text
    assert "Verdict: no current failure (no layer)" in markdown
    assert "## history (resolved since; not the verdict)" in markdown
    assert "history: the pod was scheduled to" in markdown


def test_an_unknown_kind_as_namespace_slash_name_exits_not_found_with_the_form_to_use(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="unknown-crd") as lab:
        code, _, err = _run("triage", "job", "serving/llama-srv", "--kubeconfig", str(lab.kubeconfig))
    assert code == 3
    assert "plural.group/namespace/name" in err and "kubectl api-resources" in err


def test_the_markdown_lists_the_hops_it_followed(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="pending-node-no-driver") as lab:
        code, markdown, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(lab.kubeconfig),
                                 "--format", "markdown")
    assert code == 0
    section = markdown.split("## Followed one hop beyond the target", 1)[1].split("##", 1)[0]
    assert "nodeclaim/gpu-h100-x7k2p" in section and "GPU operator pods on node/gpu-node-13" in section
