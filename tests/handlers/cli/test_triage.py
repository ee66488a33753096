"""`triage-bot triage job` and `triage-bot lab`: formats, the stable JSON schema, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from handlers.main import typer_app
from tests.support.kube_lab import running_lab
from tests.support.paths import ROOT


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(typer_app(), list(args))
    return result.exit_code, result.stdout, result.stderr


def test_json_output_follows_the_documented_schema(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="oom") as lab:
        code, out, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(lab.kubeconfig), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert {"target", "verdict", "findings", "collectors", "elapsed_ms"} <= set(data)
    assert set(data["verdict"]) >= {"layer", "confidence", "summary"}
    assert data["target"] == "ml/train-llm" and data["target_kind"] == "job"
    assert {c["name"] for c in data["collectors"]} >= {"workload", "pods", "events", "nodes", "logs"}
    assert all(set(c) >= {"outcome", "elapsed_ms", "items", "truncated"} for c in data["collectors"])
    for finding in data["findings"]:
        assert set(finding) >= {"layer", "rule", "severity", "summary", "evidence", "next"}


def test_compare_adds_a_ranked_diff_to_the_json(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="gpu-xid") as lab:
        code, out, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(lab.kubeconfig), "--format", "json",
                            "--compare", "ml/train-llm-ok")
    assert code == 0
    compare = json.loads(out)["compare"]
    assert compare["healthy"] == "ml/train-llm-ok"
    ranks = [item["rank"] for item in compare["differences"]]
    assert ranks == sorted(ranks)
    assert {item["key"] for item in compare["differences"] if item["rank"] == ranks[0]} == {"XidError", "GPUUnhealthy"}


def test_markdown_and_text_name_the_target_and_the_collectors(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="kueue-quota") as lab:
        md_code, markdown, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(lab.kubeconfig),
                                    "--format", "markdown")
        text_code, text, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(lab.kubeconfig))
    assert md_code == text_code == 0
    assert markdown.startswith("# Snapshot of `ml/train-llm` (job)") and "## Collectors" in markdown
    assert "ml/train-llm" in text and "kueue" in text


def test_bad_input_exits_2_with_the_accepted_forms() -> None:
    code, _, err = _run("triage", "job", "ml/Bad_Name")
    assert code == 2 and "Accepted forms" in err
    code, _, err = _run("triage", "job", "ml/x", "--deadline", "0")
    assert code == 2 and "--deadline" in err


def test_an_unknown_workload_exits_3(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy") as lab:
        code, _, err = _run("triage", "job", "ml/missing", "--kubeconfig", str(lab.kubeconfig))
    assert code == 3 and "missing" in err


def test_an_unreachable_cluster_exits_4(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="healthy") as lab:
        kubeconfig = lab.kubeconfig
    code, _, err = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(kubeconfig), "--deadline", "3")
    assert code == 4 and "unreachable" in err


def test_context_picks_the_cluster_from_a_kubeconfig_with_several(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="oom") as lab:
        config = json.loads(lab.server.kubeconfig_text(context="lab"))
        config["clusters"].append({"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}})
        config["contexts"].append({"name": "dead", "context": {"cluster": "dead", "user": "lab"}})
        config["current-context"] = "dead"
        kubeconfig = tmp_path / "two-contexts"
        kubeconfig.write_text(json.dumps(config), encoding="utf-8")
        chosen, out, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(kubeconfig), "--context", "lab",
                              "--format", "json")
        default, _, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(kubeconfig), "--deadline", "3")
    assert chosen == 0 and json.loads(out)["target_kind"] == "job"
    assert default == 4


def test_lab_list_names_every_scenario() -> None:
    from bot.lab import node_scenarios, scenarios

    code, out, _ = _run("lab", "list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [*scenarios.SCENARIOS, *node_scenarios.NODE_SCENARIOS]


INTERRUPTIBLE_MAIN = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); from handlers.main import main; main()"
)


def test_lab_serve_prints_a_kubeconfig_that_works_until_interrupted(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        # Ctrl-C acts as in a terminal even when this suite runs as a background job (which ignores SIGINT).
        [sys.executable, "-c", INTERRUPTIBLE_MAIN, "lab", "serve", "nccl-ib",
         "--kubeconfig-out", str(tmp_path / "kc")], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.strip() == f"kubeconfig: {tmp_path / 'kc'}"
        code, out, _ = _run("triage", "job", "ml/train-llm", "--kubeconfig", str(tmp_path / "kc"), "--format", "json")
        assert code == 0 and json.loads(out)["target_kind"] == "pytorchjob"
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
    assert process.returncode == 0


def test_an_unknown_lab_scenario_exits_2() -> None:
    code, _, err = _run("lab", "serve", "nope")
    assert code == 2 and "known:" in err


@pytest.mark.parametrize("raw", ["88123", "slurm:9876543"])  # ids this test cluster never reaches
def test_a_slurm_target_goes_to_the_slurm_collectors(raw: str) -> None:
    code, out, err = _run("triage", "job", raw, "--format", "json")
    if shutil.which("scontrol") is None:  # no Slurm client here: the collector says it skipped
        assert code == 0 and json.loads(out)["collectors"][0]["outcome"] == "skipped"
    else:  # the real one-host cluster of .ci/run has no such job: exit 3, named as a Slurm lookup
        assert code == 3 and "Slurm does not know job" in err and "sacct -j" in err
