"""Only collector modules (and the lab that simulates clusters) may talk to clusters."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_CLIENTS = {"kubernetes", "subprocess"}
ALLOWED_PREFIXES = ("bot/diagnosis/collectors/", "bot/lab/")


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_module_outside_collectors_imports_a_cluster_client() -> None:
    offenders = []
    for package in ("bot", "storage", "handlers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(ALLOWED_PREFIXES):
                continue
            used = _imported_roots(path) & CLUSTER_CLIENTS
            if used:
                offenders.append(f"{relative}: {sorted(used)}")
    assert offenders == []


def test_the_scan_sees_an_offending_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from kubernetes import client\nimport subprocess\n", encoding="utf-8")
    assert _imported_roots(sample) == {"kubernetes", "subprocess"}
