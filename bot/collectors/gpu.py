"""GPU node evidence: parsers for `nvidia-smi -q -x`, `nvidia-smi topo -m`, `dcgmi diag` and kernel Xid lines.

Parsers take text a probe or a log collector already fetched; `gpu_observations` turns them into
Observations (`gpu_health`, `gpu_topology`, `gpu_xid`) with the command a human would run on the node.
"""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime
from typing import Any
from xml.etree import ElementTree

from bot import findings, gpu_xid

SOURCE = "gpu"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class GpuParseError(ValueError):
    """The text is not the output the parser expects; the message says what was wrong."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuState:
    """One GPU from `nvidia-smi -q -x`, with the health facts rules need."""

    index: int | None
    pci: str
    uuid: str
    product: str
    ecc_mode: str | None = None
    volatile_uncorrectable: int | None = None
    volatile_correctable: int | None = None
    aggregate_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    retired_pages_pending: bool | None = None
    temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_pct: float | None = None
    persistence_mode: str | None = None
    mig_mode: str | None = None
    recovery_action: str | None = None
    clock_event_reasons: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """What is wrong with this GPU, in words (empty when healthy)."""
        found = []
        if self.volatile_uncorrectable:
            found.append(f"{self.volatile_uncorrectable} uncorrectable ECC errors since the last driver load")
        if self.remapped_rows_failure:
            found.append("row remapping failure occurred (RMA candidate)")
        if self.remapped_rows_pending:
            found.append("row remapping pending: reset the GPU to activate it")
        if self.retired_pages_pending:
            found.append("page retirement pending: reset the GPU")
        if self.recovery_action and self.recovery_action not in {"None", "N/A"}:
            found.append(f"driver asks for recovery action {self.recovery_action}")
        slow = [reason for reason in self.clock_event_reasons
                if reason in {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}]
        if slow:
            found.append("clocks held down by " + ", ".join(slow))
        return found

    @property
    def status(self) -> str:
        """`failed` (do not schedule), `degraded` (usable, needs attention) or `ok`."""
        if self.volatile_uncorrectable or self.remapped_rows_failure or (
                self.recovery_action and self.recovery_action not in {"None", "N/A"}):
            return "failed"
        return "degraded" if self.problems() else "ok"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SmiReport:
    """The node-level facts of one `nvidia-smi -q -x` run."""

    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuState, ...]


def _reject_entities(text: str) -> str:
    """nvidia-smi output never declares entities; refuse any that do (XXE, entity expansion)."""
    if "<!ENTITY" in text.upper():
        raise GpuParseError("nvidia-smi XML must not declare entities")
    return re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)


def _find_text(node: ElementTree.Element, path: str) -> str | None:
    found = node.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    return None if text in {"", "N/A", "Not Supported", "[N/A]", "Unknown Error"} else text


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    match = re.match(r"-?\d+(?:\.\d+)?", text)
    return float(match.group(0)) if match else None


def _count(text: str | None) -> int | None:
    value = _number(text)
    return int(value) if value is not None else None


def _yes(text: str | None) -> bool | None:
    if text is None:
        return None
    return text.strip().lower() in {"yes", "true", "1"}


def _sum(values: list[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def parse_nvidia_smi_xml(text: str) -> SmiReport:
    """`nvidia-smi -q -x` (driver 470..580 schemas: old single/double-bit ECC and new DRAM/SRAM counters)."""
    try:
        root = ElementTree.fromstring(_reject_entities(text))
    except ElementTree.ParseError as error:
        raise GpuParseError(f"not nvidia-smi XML: {error}") from None
    if root.tag != "nvidia_smi_log":
        raise GpuParseError(f"not nvidia-smi XML: root element is <{root.tag}>")
    gpus = []
    for gpu in root.findall("gpu"):
        ecc = gpu.find("ecc_errors")
        volatile_unc = volatile_cor = aggregate_unc = None
        if ecc is not None:
            # Driver >= 525 on Hopper: sram_*/dram_* counters; older: single_bit/double_bit totals.
            volatile_unc = _sum([_count(_find_text(ecc, f"volatile/{name}")) for name in
                                 ("dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity",
                                  "sram_uncorrectable_secded", "double_bit/total")])
            volatile_cor = _sum([_count(_find_text(ecc, f"volatile/{name}")) for name in
                                 ("dram_correctable", "sram_correctable", "single_bit/total")])
            aggregate_unc = _sum([_count(_find_text(ecc, f"aggregate/{name}")) for name in
                                  ("dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity",
                                   "sram_uncorrectable_secded", "double_bit/total")])
        clock_root = gpu.find("clocks_event_reasons")
        if clock_root is None:
            clock_root = gpu.find("clocks_throttle_reasons")
        active = tuple(
            re.sub(r"^clocks?_(event|throttle)_reason_", "", child.tag)
            for child in (list(clock_root) if clock_root is not None else [])
            if (child.text or "").strip() == "Active"
        )
        power_root = gpu.find("gpu_power_readings")
        if power_root is None:
            power_root = gpu.find("power_readings")
        power_draw = power_limit = None
        if power_root is not None:
            power_draw = _number(_find_text(power_root, "average_power_draw") or
                                 _find_text(power_root, "instant_power_draw") or _find_text(power_root, "power_draw"))
            power_limit = _number(_find_text(power_root, "current_power_limit") or
                                  _find_text(power_root, "power_limit"))
        pci = (_find_text(gpu, "pci/pci_bus_id") or gpu.get("id") or "").lower()
        gpus.append(GpuState(
            index=_count(_find_text(gpu, "minor_number")),
            pci=pci,
            uuid=_find_text(gpu, "uuid") or "",
            product=_find_text(gpu, "product_name") or "",
            ecc_mode=_find_text(gpu, "ecc_mode/current_ecc"),
            volatile_uncorrectable=volatile_unc,
            volatile_correctable=volatile_cor,
            aggregate_uncorrectable=aggregate_unc,
            remapped_rows_pending=_yes(_find_text(gpu, "remapped_rows/remapped_row_pending")),
            remapped_rows_failure=_yes(_find_text(gpu, "remapped_rows/remapped_row_failure")),
            retired_pages_pending=_yes(_find_text(gpu, "retired_pages/pending_retirement")),
            temperature_c=_number(_find_text(gpu, "temperature/gpu_temp")),
            power_draw_w=power_draw,
            power_limit_w=power_limit,
            memory_used_mib=_number(_find_text(gpu, "fb_memory_usage/used")),
            memory_total_mib=_number(_find_text(gpu, "fb_memory_usage/total")),
            utilization_pct=_number(_find_text(gpu, "utilization/gpu_util")),
            persistence_mode=_find_text(gpu, "persistence_mode"),
            mig_mode=_find_text(gpu, "mig_mode/current_mig"),
            recovery_action=_find_text(gpu, "gpu_recovery_action"),
            clock_event_reasons=active,
        ))
    return SmiReport(driver_version=_find_text(root, "driver_version"), cuda_version=_find_text(root, "cuda_version"),
                     gpus=tuple(gpus))


# ---------------------------------------------------------------- nvidia-smi topo -m

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
            for right in self.gpus[index + 1:]:
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
    header_index = next((index for index, line in enumerate(lines) if re.search(r"\bGPU0\b", line)
                         and not line.startswith("GPU0")), None)
    if header_index is None:
        raise GpuParseError("not `nvidia-smi topo -m` output: no GPU0 column header")
    columns = re.findall(r"\b(?:GPU\d+|NIC\d+|mlx5_\d+)\b", lines[header_index])
    extra = [name for name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if name in lines[header_index]]
    matrix: dict[str, dict[str, str]] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    for line in lines[header_index + 1:]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        tokens = line.split()
        name, values = tokens[0], tokens[1:1 + len(columns)]
        if len(values) < len(columns):
            continue
        matrix[name] = dict(zip(columns, values, strict=True))
        rest = tokens[1 + len(columns):]
        if name.startswith("GPU") and rest:
            if "CPU Affinity" in extra:
                cpu[name] = rest[0]
            if "NUMA Affinity" in extra and len(rest) > 1:
                numa[name] = rest[1]
    nic_names = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", "\n".join(lines), flags=re.MULTILINE))
    return Topology(
        gpus=tuple(column for column in columns if column.startswith("GPU")),
        nics=tuple(column for column in columns if not column.startswith("GPU")),
        matrix=matrix, cpu_affinity=cpu, numa_affinity=numa, nic_names=nic_names,
    )


# ---------------------------------------------------------------- dcgmi diag


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiagResult:
    """One `dcgmi diag` test outcome (per GPU group or per GPU)."""

    category: str
    test: str
    result: str  # Pass | Fail | Warn | Skip | other text as printed
    gpu_ids: str = ""
    details: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiagReport:
    """All results plus the metadata rows (DCGM version, driver, device ids)."""

    results: tuple[DiagResult, ...]
    metadata: dict[str, str]

    @property
    def failed(self) -> list[DiagResult]:
        """Tests that failed."""
        return [item for item in self.results if item.result.lower().startswith("fail")]


def _status(raw: Any) -> str:
    text = str(raw or "").strip()
    return {"PASS": "Pass", "FAIL": "Fail", "WARN": "Warn", "SKIP": "Skip", "SKIPPED": "Skip"}.get(text.upper(), text)


def parse_dcgmi_diag(text: str) -> DiagReport:
    """`dcgmi diag` table text, or its `-j` JSON (3.x `test_categories` and 4.x top-level `tests`)."""
    stripped = text.strip()
    brace = stripped.find("{")
    if brace >= 0 and ("test_categories" in stripped or '"tests"' in stripped):
        try:
            return _diag_json(json.loads(stripped[brace:]))
        except ValueError as error:
            raise GpuParseError(f"dcgmi JSON does not parse: {error}") from None
    return _diag_table(stripped)


def _diag_json(data: Any) -> DiagReport:
    root = data
    if isinstance(data, dict):
        for key in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
            if isinstance(data.get(key), dict):
                root = data[key]
    if not isinstance(root, dict):
        raise GpuParseError("dcgmi JSON has no diagnostic object")
    groups: list[tuple[str, list[Any]]] = [
        (str(category.get("category", "")), category.get("tests") or [])
        for category in root.get("test_categories") or [] if isinstance(category, dict)
    ]
    if isinstance(root.get("tests"), list):
        groups.append(("", root["tests"]))
    results = []
    for category, tests in groups:
        for test in tests:
            if not isinstance(test, dict):
                continue  # DCGM 3.x writes `null` between tests
            for result in test.get("results") or []:
                if not isinstance(result, dict):
                    continue
                details = [str(item.get("warning", item)) if isinstance(item, dict) else str(item)
                           for key in ("warnings", "info", "errors") for item in (result.get(key) or [])]
                gpu = result.get("gpu_ids", result.get("entity_id", ""))
                results.append(DiagResult(category=category or str(test.get("category", "")),
                                          test=str(test.get("name", "")), result=_status(result.get("status")),
                                          gpu_ids=str(gpu), details=tuple(details)))
    metadata = {key: str(root[key]) for key in ("version", "driver_version") if key in root}
    return DiagReport(results=tuple(results), metadata=metadata)


def _diag_table(text: str) -> DiagReport:
    if "| Diagnostic" not in text and "Diagnostic" not in text:
        raise GpuParseError("not `dcgmi diag` output: no Diagnostic table")
    category = ""
    results: list[DiagResult] = []
    metadata: dict[str, str] = {}
    for line in text.splitlines():
        heading = re.match(r"^[|+]-+\s+(\w[\w ]*?)\s+-+\+", line)
        if heading:
            category = heading.group(1).strip()
            continue
        cells = re.match(r"^\|\s?(.*?)\s*\|\s?(.*?)\s*\|\s*$", line)
        if not cells or set(line) <= {"+", "-", "=", "|", " "}:
            continue
        name, value = cells.group(1).strip(), cells.group(2).strip()
        if name == "Diagnostic":
            continue
        if category == "Metadata":
            metadata[name] = value
        elif not name and results:  # wrapped continuation of the row above
            last = results[-1]
            details = list(last.details)
            if details:
                details[-1] = details[-1] + value
            results[-1] = dataclasses.replace(last, details=tuple(details))
        elif name in {"Info", "Warning", "Error"} and results:
            last = results[-1]
            results[-1] = dataclasses.replace(last, details=(*last.details, f"{name}: {value}"))
        elif name:
            results.append(DiagResult(category=category, test=name, result=_status(value)))
    return DiagReport(results=tuple(results), metadata=metadata)


# ---------------------------------------------------------------- observations


def gpu_placement(smi: SmiReport) -> dict[str, str]:
    """Versions and products for the handoff's placement section."""
    products = sorted({gpu.product for gpu in smi.gpus if gpu.product})
    facts = {"gpu_driver": smi.driver_version or "", "cuda_driver": smi.cuda_version or "",
             "gpu_products": ", ".join(products), "gpu_count": str(len(smi.gpus))}
    return {key: value for key, value in facts.items() if value}


def gpu_observations(
    *,
    node: str,
    observed_at: datetime,
    smi: SmiReport | None = None,
    topology: Topology | None = None,
    diag: DiagReport | None = None,
    kernel_log: str | None = None,
    max_items: int = 500,
) -> list[findings.Observation]:
    """Observations for one node from whatever of the four outputs were fetched."""
    result: list[findings.Observation] = []
    for gpu in (smi.gpus if smi else ())[:max_items]:
        problems = gpu.problems()
        result.append(findings.Observation(
            source=SOURCE, kind="gpu_health", subject=f"gpu:{node}/{gpu.index}",
            text=f"{node} GPU {gpu.index} ({gpu.product}, {gpu.pci}) {gpu.status}"
                 + (": " + "; ".join(problems) if problems else ""),
            command=f"nvidia-smi -q -x -i {gpu.index}" if gpu.index is not None else "nvidia-smi -q -x",
            observed_at=observed_at,
            fields={"node": node, "check": "nvidia-smi", "gpu_index": gpu.index, "gpu_pci": gpu.pci,
                    "uuid": gpu.uuid, "product": gpu.product, "driver_version": smi.driver_version if smi else None,
                    "cuda_version": smi.cuda_version if smi else None, "status": gpu.status, "problems": problems,
                    "ecc_mode": gpu.ecc_mode, "ecc_volatile_dbe": gpu.volatile_uncorrectable,
                    "ecc_volatile_sbe": gpu.volatile_correctable, "ecc_aggregate_dbe": gpu.aggregate_uncorrectable,
                    "remapped_rows_pending": gpu.remapped_rows_pending,
                    "remapped_rows_failure": gpu.remapped_rows_failure,
                    "retired_pages_pending": gpu.retired_pages_pending, "temperature_c": gpu.temperature_c,
                    "power_draw_w": gpu.power_draw_w, "power_limit_w": gpu.power_limit_w,
                    "memory_used_mib": gpu.memory_used_mib, "memory_total_mib": gpu.memory_total_mib,
                    "utilization_pct": gpu.utilization_pct, "persistence_mode": gpu.persistence_mode,
                    "mig_mode": gpu.mig_mode, "recovery_action": gpu.recovery_action,
                    "clocks_event_reasons": list(gpu.clock_event_reasons), "layer": "runtime"},
        ))
    if topology:
        affinity = {gpu: {"nic": nearest[0], "nic_name": topology.nic_names.get(nearest[0]), "link": nearest[1]}
                    for gpu in topology.gpus if (nearest := topology.nearest_nic(gpu))}
        problems = topology.problems()
        result.append(findings.Observation(
            source=SOURCE, kind="gpu_topology", subject=f"node:{node}",
            text=f"{node}: {len(topology.gpus)} GPUs, {len(topology.nics)} NICs, "
                 f"{len(topology.nvlink_pairs)} NVLink pairs" + (": " + "; ".join(problems) if problems else ""),
            command="nvidia-smi topo -m", observed_at=observed_at,
            fields={"node": node, "gpus": list(topology.gpus), "nics": list(topology.nics),
                    "matrix": topology.matrix, "nvlink_pairs": [list(pair) for pair in topology.nvlink_pairs],
                    "nic_affinity": affinity, "cpu_affinity": topology.cpu_affinity,
                    "numa_affinity": topology.numa_affinity, "problems": problems, "layer": "runtime"},
        ))
    if diag:
        for item in diag.results[:max_items]:
            if item.result == "Pass":
                continue
            result.append(findings.Observation(
                source=SOURCE, kind="gpu_health", subject=f"node:{node}",
                text=f"{node} dcgmi diag {item.category}/{item.test}: {item.result}"
                     + (" - " + " ".join(item.details) if item.details else ""),
                command="dcgmi diag -r 1", observed_at=observed_at,
                fields={"node": node, "check": "dcgmi-diag", "test": item.test, "category": item.category,
                        "result": item.result, "gpu_ids": item.gpu_ids, "details": list(item.details),
                        "status": "failed" if item.result == "Fail" else "degraded" if item.result == "Warn"
                        else "not_run", "layer": "runtime"},
            ))
    if kernel_log:
        for event in gpu_xid.parse_kernel_xids(kernel_log, limit=max_items):
            info = gpu_xid.lookup(event.code)
            result.append(findings.Observation(
                source=SOURCE, kind="gpu_xid", subject=f"node:{node}",
                text=f"{node} Xid {event.code} on {event.gpu_pci} ({info.name}): {info.action}",
                command="journalctl -k | grep -i xid", observed_at=observed_at,
                fields={"node": node, "xid": event.code, "known": info.known, "name": info.name,
                        "meaning": info.meaning, "usual_cause": info.usual_cause, "action": info.action,
                        "drain": info.drain, "xid_source": info.source, "evidence": "kernel_log",
                        "gpu_pci": event.gpu_pci, "pid": event.pid, "line": event.line,
                        "layer": "fabric" if event.code == 74 else "runtime"},
            ))
    return result
