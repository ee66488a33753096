"""`triage-bot triage node <name>`: the same node snapshot as Slack, in the terminal, with clear exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from handlers.main import typer_app
from tests.support.kube_lab import running_lab


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(typer_app("triage"), list(args))
    return result.exit_code, result.stdout, result.stderr


def test_node_prints_the_verdict_the_blast_radius_and_the_commands_as_json(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-not-ready") as lab:
        code, out, _ = _run("triage", "node", "gpu-node-07", "--kubeconfig", str(lab.kubeconfig), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert (data["target"], data["target_kind"], data["verdict"]["layer"]) == ("node:gpu-node-07", "node", "runtime")
    assert {c["name"] for c in data["collectors"]} >= {"node", "events", "node.pods", "gpu.dcgm"}
    steps = next(item for item in data["findings"] if item["rule"] == "node.next-steps")
    assert steps["next"].startswith("kubectl cordon gpu-node-07 ; kubectl drain gpu-node-07")


def test_node_as_text_names_each_step_for_a_human(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as lab:
        code, out, _ = _run("triage", "node", "node:gpu-node-05", "--kubeconfig", str(lab.kubeconfig))
    assert code == 0
    assert "verdict: runtime" in out and "kubectl uncordon gpu-node-05" in out


@pytest.mark.parametrize(("args", "code", "message"), [
    (("triage", "node", "gpu[1-4]"), 2, "not a Kubernetes node name"),
    (("triage", "node", "slurm:a,b"), 2, "not a Slurm node name"),
])
def test_a_bad_node_name_exits_2_before_any_read(args: tuple[str, ...], code: int, message: str) -> None:
    got, _, err = _run(*args)
    assert got == code and message in err


def test_an_unknown_node_exits_3_and_says_how_to_list_nodes(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-healthy") as lab:
        code, _, err = _run("triage", "node", "gpu-node-99", "--kubeconfig", str(lab.kubeconfig))
    assert code == 3 and "kubectl get nodes" in err


@pytest.mark.slurm
@pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm client tools are not installed")
def test_a_slurm_node_is_triaged_from_the_terminal_through_the_cli_backend() -> None:
    code, out, _ = _run("triage", "node", "slurm:gpu-absent-1", "--format", "markdown")
    assert code == 0
    assert "slurm-node:gpu-absent-1" in out and "scontrol update NodeName=gpu-absent-1 State=RESUME" in out
