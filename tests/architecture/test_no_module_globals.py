"""No module-level Slack app, Web API client, database engine or settings: everything is passed in."""

import ast

from tests.support.paths import ROOT

FORBIDDEN_AT_IMPORT = {
    "App",
    "WebClient",
    "SocketModeHandler",
    "make_engine",
    "create_engine",
    "Settings",
    "load_settings",
}


def _called_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def module_level_constructions(source: str) -> set[str]:
    """Forbidden constructors called by statements that run at import time (not inside defs)."""
    found: set[str] = set()
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and _called_name(node) in FORBIDDEN_AT_IMPORT:
                found.add(_called_name(node))
    return found


def test_no_module_builds_an_app_client_engine_or_settings_at_import() -> None:
    offenders = []
    for package in ("bot", "handlers", "storage"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue  # alembic's env.py builds its engine when alembic runs it, by design
            used = module_level_constructions(path.read_text(encoding="utf-8"))
            if used:
                offenders.append(f"{path.relative_to(ROOT).as_posix()}: {sorted(used)}")
    assert offenders == []


def test_the_scan_sees_a_module_level_app_but_not_one_inside_a_function() -> None:
    assert module_level_constructions("from slack_bolt import App\napp = App(token='x')\n") == {"App"}
    assert module_level_constructions("def build():\n    return make_engine(url='x')\n") == set()
    assert module_level_constructions("if True:\n    settings = config.load_settings()\n") == {
        "load_settings"
    }
