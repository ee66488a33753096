"""Run the real helm and kubectl on the chart with every home/cache directory redirected to a temp dir."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import ROOT

REPO_ROOT = ROOT
CHART_DIR = REPO_ROOT / "helm" / "triage-bot"
RELEASE = "triage"
NAMESPACE = "ops"


def find_tool(*, name: str, env_var: str) -> str | None:
    """Prefer the binary .ci/setup.d/40-helm.sh exported, then the repo cache, then PATH."""
    candidates = [os.environ.get(env_var), str(REPO_ROOT / ".tools" / "bin" / name), shutil.which(name)]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def isolated_env(*, home: Path) -> dict[str, str]:
    """An environment where helm and kubectl can write only under `home` and reach no cluster."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HELM_", "KUBE"))}
    for sub in ("config", "cache", "data", "state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        XDG_DATA_HOME=str(home / "data"),
        XDG_STATE_HOME=str(home / "state"),
        KUBECONFIG=str(home / "no-kubeconfig"),
    )
    return env


@dataclass(frozen=True)
class Helm:
    """The helm binary plus the sandboxed environment it runs in."""

    binary: str
    env: Mapping[str, str]

    def run(self, *, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """Run helm with an argv list (never a shell) and capture its output."""
        return subprocess.run(
            [self.binary, *args], env=dict(self.env), capture_output=True, text=True, timeout=120, check=False
        )

    def template(self, *, values: Mapping[str, Any] | None = None, set_args: Sequence[str] = ()) -> str:
        """Render the chart, failing the test with helm's own message if it refuses."""
        result = self.template_result(values=values, set_args=set_args)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def template_result(
        self, *, values: Mapping[str, Any] | None = None, set_args: Sequence[str] = ()
    ) -> subprocess.CompletedProcess[str]:
        """Render the chart and return the raw result, for tests that expect a refusal."""
        args = ["template", RELEASE, str(CHART_DIR), "--namespace", NAMESPACE]
        if values:
            values_file = Path(self.env["HOME"]) / f"values-{abs(hash(yaml.safe_dump(dict(values))))}.yaml"
            values_file.write_text(yaml.safe_dump(dict(values)), encoding="utf-8")
            args += ["--values", str(values_file)]
        for item in set_args:
            args += ["--set", item]
        return self.run(args=args)


def parse_manifests(*, text: str) -> list[dict[str, Any]]:
    """Split helm's multi-document output into the non-empty objects."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def only(*, docs: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """The single object of a kind, asserting there is exactly one."""
    found = [dict(doc) for doc in docs if doc.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def of_kind(*, docs: Sequence[Mapping[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Every object of a kind."""
    return [dict(doc) for doc in docs if doc.get("kind") == kind]


def env_of(*, container: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """A container's env entries by name."""
    return {entry["name"]: entry for entry in container.get("env", [])}
