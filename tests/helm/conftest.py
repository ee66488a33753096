"""Fixtures for the chart tests: the real helm/kubectl binaries in a sandboxed HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helm.chart import Helm, find_tool, isolated_env


@pytest.fixture(scope="session")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway HOME so helm writes nothing into the user's home."""
    return tmp_path_factory.mktemp("helm-home")


@pytest.fixture(scope="session")
def helm(helm_home: Path) -> Helm:
    """The real helm 3.17 fetched by .ci/setup.d/40-helm.sh."""
    binary = find_tool(name="helm", env_var="TRIAGE_HELM")
    if binary is None:
        pytest.skip("helm not found: run `source .ci/setup.d/40-helm.sh` (sets TRIAGE_HELM)")
    return Helm(binary=binary, env=isolated_env(home=helm_home))


@pytest.fixture(scope="session")
def kubectl() -> str:
    """The real kubectl 1.32 fetched by .ci/setup.d/40-helm.sh (or the machine's)."""
    binary = find_tool(name="kubectl", env_var="TRIAGE_KUBECTL")
    if binary is None:
        pytest.skip("kubectl not found: run `source .ci/setup.d/40-helm.sh` (sets TRIAGE_KUBECTL)")
    return binary
