"""GPU node evidence: the `nvidia-smi -q -x` parser, and `gpu_observations` for every GPU output.

Parsers take text a probe or a log collector already fetched (topology: gpu_topology, dcgmi: gpu_dcgmi);
`gpu_observations` turns them into Observations (`gpu_health`, `gpu_topology`, `gpu_xid`) with the command a
human would run on the node.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from xml.etree import ElementTree

from bot.diagnosis.collectors.gpu.dcgmi import DiagReport
from bot.diagnosis.collectors.gpu.errors import GpuParseError
from bot.diagnosis.collectors.gpu.topology import Topology
from bot.diagnosis.knowledge import xid as gpu_xid
from bot.evidence import findings

__all__ = [
    "GpuParseError",
    "GpuState",
    "SmiReport",
    "gpu_observations",
    "gpu_placement",
    "parse_nvidia_smi_xml",
]

SOURCE = "gpu"


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
        slow = [
            reason
            for reason in self.clock_event_reasons
            if reason
            in {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}
        ]
        if slow:
            found.append("clocks held down by " + ", ".join(slow))
        return found

    @property
    def status(self) -> str:
        """`failed` (do not schedule), `degraded` (usable, needs attention) or `ok`."""
        if (
            self.volatile_uncorrectable
            or self.remapped_rows_failure
            or (self.recovery_action and self.recovery_action not in {"None", "N/A"})
        ):
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


# Driver >= 525 on Hopper reports sram_*/dram_* counters; older drivers single_bit/double_bit totals.
_UNCORRECTABLE_COUNTERS = (
    "dram_uncorrectable",
    "sram_uncorrectable",
    "sram_uncorrectable_parity",
    "sram_uncorrectable_secded",
    "double_bit/total",
)
_CORRECTABLE_COUNTERS = ("dram_correctable", "sram_correctable", "single_bit/total")


def _ecc_total(ecc: ElementTree.Element, *, scope: str, counters: tuple[str, ...]) -> int | None:
    """Sum the ECC counters of one scope (volatile or aggregate) that this driver reports."""
    return _sum([_count(_find_text(ecc, f"{scope}/{name}")) for name in counters])


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
            volatile_unc = _ecc_total(ecc, scope="volatile", counters=_UNCORRECTABLE_COUNTERS)
            volatile_cor = _ecc_total(ecc, scope="volatile", counters=_CORRECTABLE_COUNTERS)
            aggregate_unc = _ecc_total(ecc, scope="aggregate", counters=_UNCORRECTABLE_COUNTERS)
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
            power_draw = _number(
                _find_text(power_root, "average_power_draw")
                or _find_text(power_root, "instant_power_draw")
                or _find_text(power_root, "power_draw")
            )
            power_limit = _number(
                _find_text(power_root, "current_power_limit") or _find_text(power_root, "power_limit")
            )
        pci = (_find_text(gpu, "pci/pci_bus_id") or gpu.get("id") or "").lower()
        gpus.append(
            GpuState(
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
            )
        )
    return SmiReport(
        driver_version=_find_text(root, "driver_version"),
        cuda_version=_find_text(root, "cuda_version"),
        gpus=tuple(gpus),
    )


# ---------------------------------------------------------------- observations


def gpu_placement(smi: SmiReport) -> dict[str, str]:
    """Versions and products for the handoff's placement section."""
    products = sorted({gpu.product for gpu in smi.gpus if gpu.product})
    facts = {
        "gpu_driver": smi.driver_version or "",
        "cuda_driver": smi.cuda_version or "",
        "gpu_products": ", ".join(products),
        "gpu_count": str(len(smi.gpus)),
    }
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
        result.append(
            findings.Observation(
                source=SOURCE,
                kind="gpu_health",
                subject=f"gpu:{node}/{gpu.index}",
                text=f"{node} GPU {gpu.index} ({gpu.product}, {gpu.pci}) {gpu.status}"
                + (": " + "; ".join(problems) if problems else ""),
                command=f"nvidia-smi -q -x -i {gpu.index}" if gpu.index is not None else "nvidia-smi -q -x",
                observed_at=observed_at,
                fields={
                    "node": node,
                    "check": "nvidia-smi",
                    "gpu_index": gpu.index,
                    "gpu_pci": gpu.pci,
                    "uuid": gpu.uuid,
                    "product": gpu.product,
                    "driver_version": smi.driver_version if smi else None,
                    "cuda_version": smi.cuda_version if smi else None,
                    "status": gpu.status,
                    "problems": problems,
                    "ecc_mode": gpu.ecc_mode,
                    "ecc_volatile_dbe": gpu.volatile_uncorrectable,
                    "ecc_volatile_sbe": gpu.volatile_correctable,
                    "ecc_aggregate_dbe": gpu.aggregate_uncorrectable,
                    "remapped_rows_pending": gpu.remapped_rows_pending,
                    "remapped_rows_failure": gpu.remapped_rows_failure,
                    "retired_pages_pending": gpu.retired_pages_pending,
                    "temperature_c": gpu.temperature_c,
                    "power_draw_w": gpu.power_draw_w,
                    "power_limit_w": gpu.power_limit_w,
                    "memory_used_mib": gpu.memory_used_mib,
                    "memory_total_mib": gpu.memory_total_mib,
                    "utilization_pct": gpu.utilization_pct,
                    "persistence_mode": gpu.persistence_mode,
                    "mig_mode": gpu.mig_mode,
                    "recovery_action": gpu.recovery_action,
                    "clocks_event_reasons": list(gpu.clock_event_reasons),
                    "layer": "runtime",
                },
            )
        )
    if topology:
        affinity = {
            gpu: {"nic": nearest[0], "nic_name": topology.nic_names.get(nearest[0]), "link": nearest[1]}
            for gpu in topology.gpus
            if (nearest := topology.nearest_nic(gpu))
        }
        problems = topology.problems()
        result.append(
            findings.Observation(
                source=SOURCE,
                kind="gpu_topology",
                subject=f"node:{node}",
                text=f"{node}: {len(topology.gpus)} GPUs, {len(topology.nics)} NICs, "
                f"{len(topology.nvlink_pairs)} NVLink pairs"
                + (": " + "; ".join(problems) if problems else ""),
                command="nvidia-smi topo -m",
                observed_at=observed_at,
                fields={
                    "node": node,
                    "gpus": list(topology.gpus),
                    "nics": list(topology.nics),
                    "matrix": topology.matrix,
                    "nvlink_pairs": [list(pair) for pair in topology.nvlink_pairs],
                    "nic_affinity": affinity,
                    "cpu_affinity": topology.cpu_affinity,
                    "numa_affinity": topology.numa_affinity,
                    "problems": problems,
                    "layer": "runtime",
                },
            )
        )
    if diag:
        for item in diag.results[:max_items]:
            if item.result == "Pass":
                continue
            result.append(
                findings.Observation(
                    source=SOURCE,
                    kind="gpu_health",
                    subject=f"node:{node}",
                    text=f"{node} dcgmi diag {item.category}/{item.test}: {item.result}"
                    + (" - " + " ".join(item.details) if item.details else ""),
                    command="dcgmi diag -r 1",
                    observed_at=observed_at,
                    fields={
                        "node": node,
                        "check": "dcgmi-diag",
                        "test": item.test,
                        "category": item.category,
                        "result": item.result,
                        "gpu_ids": item.gpu_ids,
                        "details": list(item.details),
                        "status": "failed"
                        if item.result == "Fail"
                        else "degraded"
                        if item.result == "Warn"
                        else "not_run",
                        "layer": "runtime",
                    },
                )
            )
    if kernel_log:
        for event in gpu_xid.parse_kernel_xids(kernel_log, limit=max_items):
            info = gpu_xid.lookup(event.code)
            result.append(
                findings.Observation(
                    source=SOURCE,
                    kind="gpu_xid",
                    subject=f"node:{node}",
                    text=f"{node} Xid {event.code} on {event.gpu_pci} ({info.name}): {info.action}",
                    command="journalctl -k | grep -i xid",
                    observed_at=observed_at,
                    fields={
                        "node": node,
                        "xid": event.code,
                        "known": info.known,
                        "name": info.name,
                        "meaning": info.meaning,
                        "usual_cause": info.usual_cause,
                        "action": info.action,
                        "drain": info.drain,
                        "xid_source": info.source,
                        "evidence": "kernel_log",
                        "gpu_pci": event.gpu_pci,
                        "pid": event.pid,
                        "line": event.line,
                        "layer": "fabric" if event.code == 74 else "runtime",
                    },
                )
            )
    return result
