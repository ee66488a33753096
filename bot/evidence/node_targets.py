"""Node targets: `/triage node <name>` for a Kubernetes node or a Slurm node, validated before any read.

Canonical keys are `node:<name>` (Kubernetes) and `slurm-node:<name>` (Slurm): a colon never appears in a
namespace, so neither form can be mistaken for `namespace/name`, and an incident's stored target parses
back to the same node. One open incident per node: the key is the incident's workload_key.
"""

from __future__ import annotations

import dataclasses
import re

from bot.evidence.targets import MAX_ID_LENGTH, InvalidTarget, Platform, Target

K8S_PREFIX = "node:"
SLURM_PREFIX = "slurm-node:"
# Kubernetes node names are DNS-1123 subdomains (lowercase, at most 253 characters).
_K8S_NODE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# Slurm node names are host names: letters, digits, '-', '_', '.'; never a hostlist (`gpu[1-4]`, `a,b`).
_SLURM_NODE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?")

NODE_FORMS = (
    "a Kubernetes node name (`gpu-node-05`, or `node:gpu-node-05`), or a Slurm node as "
    "`slurm:<name>` (e.g. `slurm:dgx-017`)"
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeTarget(Target):
    """One node, on a Kubernetes cluster or in a Slurm cluster."""

    @property
    def key(self) -> str:
        """`node:<name>` or `slurm-node:<name>`: what the incident stores and parse_target reads back."""
        return f"{self.cluster}:{self.workload_key}" if self.cluster else self.workload_key

    @property
    def workload_key(self) -> str:
        """One open incident per node (per cluster: the cluster is stored beside it), whoever asked."""
        return f"{SLURM_PREFIX if self.platform is Platform.SLURM else K8S_PREFIX}{self.name}"

    @property
    def kind_label(self) -> str:
        """The report's target_kind."""
        return "slurm-node" if self.platform is Platform.SLURM else "node"

    def __str__(self) -> str:
        return self.key


def _shown(value: str) -> str:
    cleaned = "".join(ch if 32 <= ord(ch) < 127 and ch != "`" else "?" for ch in value)
    return cleaned if len(cleaned) <= 60 else cleaned[:57] + "..."


def parse_node_target(raw: str) -> NodeTarget:
    """`<name>` / `node:<name>` (Kubernetes) or `slurm:<name>` / `slurm-node:<name>` (Slurm); strict names."""
    text = raw.strip()
    if not text:
        raise InvalidTarget(f"Missing node name. Accepted forms: {NODE_FORMS}.")
    if len(text) > MAX_ID_LENGTH:
        raise InvalidTarget(f"That node name is {len(text)} characters long; names are at most {MAX_ID_LENGTH}.")
    lowered = text.lower()
    for prefix, platform in ((SLURM_PREFIX, Platform.SLURM), ("slurm:", Platform.SLURM), (K8S_PREFIX, None)):
        if lowered.startswith(prefix):
            name = text[len(prefix):]
            break
    else:
        name, platform = text, None
    if platform is Platform.SLURM:
        if not name.isascii() or not _SLURM_NODE.fullmatch(name):
            raise InvalidTarget(
                f"`{_shown(text)}` is not a Slurm node name: one host name of letters, digits, '-', '_' and '.' "
                f"(no hostlists such as `gpu[1-4]`). Accepted forms: {NODE_FORMS}."
            )
        return NodeTarget(platform=Platform.SLURM, name=name)
    if len(name) > 253 or not name.isascii() or not _K8S_NODE.fullmatch(name):
        raise InvalidTarget(
            f"`{_shown(text)}` is not a Kubernetes node name: lowercase letters, digits, '-' and '.', at most "
            f"253 characters. Accepted forms: {NODE_FORMS}."
        )
    return NodeTarget(platform=Platform.KUBERNETES, name=name)
