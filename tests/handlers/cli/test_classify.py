"""`triage-bot classify` reads evidence lines on stdin and prints layer, rule, scope and next per line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from handlers.main import typer_app

LINES = "0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint {gpu: }.\n\nthe weather is nice today\nNCCL WARN NET/IB : Got completion from peer 10.0.0.7<54862> with status=12 vendor err 129 (Recv)"


def _run(*args: str, stdin: str):
    return CliRunner().invoke(typer_app(), ["classify", *args], input=stdin)


def test_json_lines_give_one_object_per_non_empty_line_with_null_layer_when_unknown() -> None:
    result = _run("--format", "json", stdin=LINES)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [row["layer"] for row in rows] == ["scheduler", None, "fabric"]
    assert rows[0]["rule"] == "scheduler.k8s.insufficient-resources"
    assert rows[1] == {
        "text": "the weather is nice today",
        "layer": None,
        "rule": None,
        "scope": None,
        "next": "",
    }
    assert rows[2]["scope"] == "path-local"
    assert rows[2]["next"]


def test_text_format_prints_tab_separated_columns_with_dashes_for_unknown() -> None:
    result = _run(stdin=LINES)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split("\t")[:3] == ["scheduler", "scheduler.k8s.insufficient-resources", "workload"]
    assert lines[1] == "-\t-\t-\t-"


def test_an_unknown_format_is_refused_with_a_clear_message() -> None:
    result = _run("--format", "yaml", stdin=LINES)
    assert result.exit_code != 0
    assert "yaml" in result.output


def test_bytes_that_are_not_utf8_are_replaced_not_fatal() -> None:
    result = CliRunner().invoke(typer_app(), ["classify", "--format", "json"], input=b"\xff\xfe OOMKilled\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["layer"] == "runtime"


# The corpus holds this vLLM check with other numbers (a known line); the second one it does not hold.
KNOWN = "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3)."
READ = "ValueError: Number of attention heads (40) must be divisible by tensor parallel size (3)."


def test_a_known_line_says_known_in_the_rule_column_and_in_json_and_a_learned_one_its_confidence() -> None:
    text = _run(stdin=f"{KNOWN}\n{READ}\n")
    assert text.exit_code == 0, text.output
    known, read = (line.split("\t") for line in text.output.splitlines())
    assert known[:3] == ["workflow", "known", "workload"]
    assert read[1].startswith("learned:0.") and read[0] == "workflow"
    assert known[4].startswith("workflow (vllm): ValueError: Total number of attention heads")
    rows = [json.loads(line) for line in _run("--format", "json", stdin=f"{KNOWN}\n{READ}\n").output.splitlines()]
    assert rows[0]["known"] is True and rows[0]["learned"] is True and rows[0]["confidence"] == 0.95
    assert "known" not in rows[1] and rows[1]["learned"] is True


def test_a_rule_the_model_rules_out_prints_no_layer_and_says_doubted_after_the_rule_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.diagnosis.classify import hybrid

    monkeypatch.setattr(hybrid, "VETO_BELOW", 1.01)  # every rule's layer is under the bar
    line = "0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 8 node(s) had untolerated taint {gpu: }."
    result = _run(stdin=line + "\n")
    assert result.exit_code == 0, result.output
    layer, rule, scope, next_step = result.output.rstrip("\n").split("\t")
    assert (layer, scope) == ("-", "-")
    assert rule.endswith(" (doubted)") and rule.startswith("scheduler.")
    assert next_step != "-"
