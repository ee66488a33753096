"""The Dockerfile builds in one stage and runs as non-root from a slim Python 3.11 image with no build tools."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field

from tests.helm.chart import REPO_ROOT

_BUILD_TOOLS = ("build-essential", "gcc", "g++", "make", "python3-dev", "libpq-dev", "git")


@dataclass
class Stage:
    """One FROM ... stage: its base image, name and instructions (continuation lines joined)."""

    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def arguments(self, *, keyword: str) -> list[str]:
        """The arguments of every instruction with this keyword, in order."""
        return [argument for key, argument in self.instructions if key == keyword]


def _stages() -> list[Stage]:
    text = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    logical = re.sub(
        r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    )
    stages: list[Stage] = []
    for line in logical.splitlines():
        if not line.strip():
            continue
        keyword, _, argument = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            match = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", argument.strip(), flags=re.IGNORECASE)
            assert match, line
            stages.append(Stage(base=match[1], name=match[2]))
        else:
            stages[-1].instructions.append((keyword.upper(), argument.strip()))
    return stages


def test_the_image_is_multi_stage_with_a_slim_python_311_runtime() -> None:
    stages = _stages()
    assert len(stages) >= 2
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", stages[-1].base)
    assert any("pip wheel" in run for run in stages[0].arguments(keyword="RUN"))


def test_the_final_stage_installs_no_build_tools_and_only_from_built_wheels() -> None:
    final = _stages()[-1]
    runs = " ".join(final.arguments(keyword="RUN"))
    assert "apt-get install" not in runs
    assert not [tool for tool in _BUILD_TOOLS if re.search(rf"(^|\s){re.escape(tool)}(\s|$)", runs)]
    assert "--no-index" in runs, "the runtime must not reach an index: it installs the builder's wheels"


def test_the_final_stage_runs_as_user_10001_with_the_cli_entrypoint() -> None:
    final = _stages()[-1]
    assert final.arguments(keyword="USER")[-1].split(":")[0] == "10001"
    assert final.arguments(keyword="ENTRYPOINT") == ['["triage-bot"]']
    assert final.arguments(keyword="CMD") == ['["serve"]']
    assert "3000" in final.arguments(keyword="EXPOSE")


def test_the_build_context_keeps_every_file_the_package_build_needs() -> None:
    ignored = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    needed = ["pyproject.toml", project["readme"], "bot", "handlers", "storage", "templates"]
    copied = " ".join(_stages()[0].arguments(keyword="COPY"))
    for path in needed:
        assert not any(fnmatch.fnmatch(path, pattern) for pattern in ignored), f"{path} is dockerignored"
        assert path in copied, f"{path} is not copied into the builder"
    for secret_like in (".env", ".git", "triage.db"):
        assert secret_like in ignored
