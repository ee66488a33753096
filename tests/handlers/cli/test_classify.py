"""`triage-bot classify` reads evidence lines on stdin and prints layer, rule, scope and next per line."""

from __future__ import annotations

import json

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
