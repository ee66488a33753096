"""Start a lab API server for a test and hand back settings pointing the real client at it."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.config import Settings, SnapshotBounds, load_settings
from bot.lab import scenarios
from bot.lab.kube_api import ClusterState, KubeApiServer


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lab:
    """A running lab cluster: the server, its kubeconfig, and settings for diagnose()."""

    server: KubeApiServer
    kubeconfig: Path
    scenario: scenarios.Scenario | None

    def settings(self, **bounds: Any) -> Settings:
        """Settings for this lab with the given snapshot bounds."""
        return load_settings(KUBECONFIG=str(self.kubeconfig), bounds=SnapshotBounds(**bounds))


@contextlib.contextmanager
def running_lab(*, tmp_path: Path, scenario: str | None = None, state: ClusterState | None = None) -> Iterator[Lab]:
    """Serve a scenario (or a hand-built state) on loopback for the duration of the block."""
    built = scenarios.build(scenario) if scenario else None
    server = KubeApiServer(state=built.state if built else state)
    with server:
        kubeconfig = server.write_kubeconfig(path=tmp_path / f"kubeconfig-{id(server)}")
        yield Lab(server=server, kubeconfig=kubeconfig, scenario=built)
