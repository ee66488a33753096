"""`nvidia-smi topo -m`: the GPU/NIC matrix, NVLink pairs, each GPU's nearest NIC and topology smells."""

from __future__ import annotations

import dataclasses
import re

from bot.diagnosis.collectors.gpu.errors import GpuParseError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_LINK_RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Topology:
    """The `nvidia-smi topo -m` matrix with each GPU's nearest NIC and NVLink pairs."""

    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    matrix: dict[str, dict[str, str]]
    cpu_affinity: dict[str, str]
    numa_affinity: dict[str, str]
    nic_names: dict[str, str]

    @property
    def nvlink_pairs(self) -> list[tuple[str, str, int]]:
        """(GPUa, GPUb, links) for every NV# pair, each pair once."""
        pairs = []
        for index, left in enumerate(self.gpus):
            for right in self.gpus[index + 1 :]:
                match = re.fullmatch(r"NV(\d+)", self.matrix.get(left, {}).get(right, ""))
                if match:
                    pairs.append((left, right, int(match.group(1))))
        return pairs

    def nearest_nic(self, gpu: str) -> tuple[str, str] | None:
        """(NIC, link) closest to this GPU by PCIe distance, or None without NICs."""
        row = self.matrix.get(gpu, {})
        ranked = sorted((_LINK_RANK.get(row.get(nic, ""), 9), nic) for nic in self.nics if nic in row)
        return (ranked[0][1], row[ranked[0][1]]) if ranked else None

    def problems(self) -> list[str]:
        """Topology smells: a GPU without NVLink to its peers on an NVLink node, a GPU whose nearest NIC is SYS."""
        found = []
        linked = {gpu for pair in self.nvlink_pairs for gpu in pair[:2]}
        if linked:
            for gpu in self.gpus:
                if gpu not in linked:
                    found.append(f"{gpu} has no NVLink to any other GPU on an NVLink node")
        for gpu in self.gpus:
            nearest = self.nearest_nic(gpu)
            if nearest and nearest[1] == "SYS":
                found.append(f"{gpu}'s nearest NIC {nearest[0]} is across NUMA nodes (SYS)")
        return found


def parse_topology(text: str) -> Topology:
    """`nvidia-smi topo -m`: header of GPU/NIC columns, one row per device, then the legends."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_index = next(
        (
            index
            for index, line in enumerate(lines)
            if re.search(r"\bGPU0\b", line) and not line.startswith("GPU0")
        ),
        None,
    )
    if header_index is None:
        raise GpuParseError("not `nvidia-smi topo -m` output: no GPU0 column header")
    columns = re.findall(r"\b(?:GPU\d+|NIC\d+|mlx5_\d+)\b", lines[header_index])
    extra = [name for name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if name in lines[header_index]]
    matrix: dict[str, dict[str, str]] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    for line in lines[header_index + 1 :]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        tokens = line.split()
        name, values = tokens[0], tokens[1 : 1 + len(columns)]
        if len(values) < len(columns):
            continue
        matrix[name] = dict(zip(columns, values, strict=True))
        rest = tokens[1 + len(columns) :]
        if name.startswith("GPU") and rest:
            if "CPU Affinity" in extra:
                cpu[name] = rest[0]
            if "NUMA Affinity" in extra and len(rest) > 1:
                numa[name] = rest[1]
    nic_names = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", "\n".join(lines), flags=re.MULTILINE))
    return Topology(
        gpus=tuple(column for column in columns if column.startswith("GPU")),
        nics=tuple(column for column in columns if not column.startswith("GPU")),
        matrix=matrix,
        cpu_affinity=cpu,
        numa_affinity=numa,
        nic_names=nic_names,
    )
