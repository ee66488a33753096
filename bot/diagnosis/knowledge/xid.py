"""NVIDIA Xid codes: what each means and what to do, each entry with its source; unknown codes stay unknown.

Also finds Xid mentions in kernel lines (`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ...`) and in free text
such as Slurm drain reasons ("Xid 79 GPU has fallen off the bus").
"""

from __future__ import annotations

import dataclasses
import re

CATALOG = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
XID_GUIDE = "https://docs.nvidia.com/deploy/xid-errors/index.html"
PAGE_RETIREMENT = "https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html"
MEMORY_ERRORS = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
HEALTH_CHECKS = "https://docs.nvidia.com/health-validation/reference/checks/xid.md"


@dataclasses.dataclass(frozen=True, kw_only=True)
class XidInfo:
    """One Xid code: meaning, who usually causes it, the action, whether to drain the node, a source."""

    code: int
    name: str
    meaning: str
    usual_cause: str  # application | driver | hardware | fabric | follow-on
    action: str
    drain: bool
    known: bool = True
    source: str = ""


def _entry(
    code: int, name: str, meaning: str, usual_cause: str, action: str, drain: bool, source: str
) -> XidInfo:
    return XidInfo(
        code=code,
        name=name,
        meaning=meaning,
        usual_cause=usual_cause,
        action=action,
        drain=drain,
        source=source,
    )


XID_TABLE: dict[int, XidInfo] = {
    info.code: info
    for info in (
        _entry(
            8,
            "GPU stopped processing",
            "A channel idled out (ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT).",
            "application",
            "Restart the application; if it repeats on the same GPU, run `dcgmi diag -r 2`.",
            False,
            CATALOG,
        ),
        _entry(
            13,
            "Graphics Engine Exception",
            "The GPU's engine faulted on the running kernel; usually an "
            "out-of-bounds access or illegal instruction in the application.",
            "application",
            "Debug the application (compute-sanitizer); the GPU is normally healthy. Repeats on one GPU across "
            "different jobs: run `dcgmi diag -r 3`.",
            False,
            XID_GUIDE,
        ),
        _entry(
            31,
            "GPU memory page fault",
            "An MMU fault: a kernel touched an invalid GPU address.",
            "application",
            "Usually the application (illegal address, use-after-free); debug it. Repeats across jobs on one "
            "GPU: run diagnostics.",
            False,
            XID_GUIDE,
        ),
        _entry(
            32,
            "Invalid or corrupted push buffer stream",
            "The driver saw a corrupted command stream (often PCIe or system memory corruption).",
            "hardware",
            "Check PCIe link health (AER errors in dmesg) and host memory; run `dcgmi diag -r 3`.",
            False,
            XID_GUIDE,
        ),
        _entry(
            38,
            "Driver firmware error",
            "The driver reported a firmware error.",
            "driver",
            "Collect `nvidia-bug-report.sh`; update the driver/firmware.",
            False,
            XID_GUIDE,
        ),
        _entry(
            43,
            "GPU stopped processing (application fault)",
            "The GPU stopped a channel after a user "
            "application fault (ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR); the GPU stays usable.",
            "application",
            "Restart the application; look for the application error just before it.",
            False,
            CATALOG,
        ),
        _entry(
            45,
            "Preemptive cleanup",
            "The driver cleaned up channels after an earlier error or because the "
            "process was killed (e.g. Ctrl-C, OOM kill).",
            "follow-on",
            "Not a root cause: look for the Xid or kill that came before it.",
            False,
            XID_GUIDE,
        ),
        _entry(
            46,
            "GPU stopped processing",
            "The GPU stopped processing work.",
            "hardware",
            "Drain the node, reset the GPU (`nvidia-smi -r`); if it repeats, service the GPU.",
            True,
            HEALTH_CHECKS,
        ),
        _entry(
            48,
            "Double Bit ECC Error (DBE)",
            "An uncorrectable double-bit ECC error in GPU memory.",
            "hardware",
            "Drain the node; reset the GPU so the page is retired/row remapped; service it if DBEs recur.",
            True,
            PAGE_RETIREMENT,
        ),
        _entry(
            61,
            "Internal micro-controller breakpoint/warning",
            "The GPU's internal micro-controller hit a breakpoint or warning.",
            "driver",
            "Reset the GPU; update the driver if it recurs.",
            False,
            XID_GUIDE,
        ),
        _entry(
            62,
            "Internal micro-controller halt",
            "The GPU's internal micro-controller halted.",
            "hardware",
            "Drain the node and reset the GPU; service it if it recurs.",
            True,
            XID_GUIDE,
        ),
        _entry(
            63,
            "ECC page retirement or row remapping recorded",
            "A memory row/page was marked for remapping "
            "or retirement; it takes effect at the next GPU reset.",
            "hardware",
            "Reset the GPU when it is idle to activate the remap (`nvidia-smi -q -d ROW_REMAPPER`); no urgent "
            "action.",
            False,
            MEMORY_ERRORS,
        ),
        _entry(
            64,
            "ECC page retirement or row remapping failure",
            "Recording a page retirement or row remap failed.",
            "hardware",
            "Drain the node; reset the GPU; if row remapping failed (`nvidia-smi -q -d ROW_REMAPPER`), service "
            "(RMA) the GPU.",
            True,
            MEMORY_ERRORS,
        ),
        _entry(
            69,
            "Graphics Engine class error",
            "The engine rejected a method (class error).",
            "application",
            "Usually the application or driver; restart the application and update the driver if it recurs.",
            False,
            XID_GUIDE,
        ),
        _entry(
            74,
            "NVLink error",
            "An NVLink link reported an error.",
            "fabric",
            "Check `nvidia-smi nvlink -s`/`-e` on the node; reset the GPU; if the same link keeps failing, "
            "service the GPU or the NVLink/NVSwitch path.",
            True,
            CATALOG,
        ),
        _entry(
            79,
            "GPU has fallen off the bus",
            "The GPU stopped answering on PCIe.",
            "hardware",
            "Drain the node and service it (PCIe, power, thermals); a node reboot is needed to recover the GPU.",
            True,
            XID_GUIDE,
        ),
        _entry(
            92,
            "High single-bit ECC error rate",
            "Correctable ECC errors are arriving at a high rate.",
            "hardware",
            "Keep running but watch it; run `dcgmi diag -r 3` at the next maintenance window.",
            False,
            XID_GUIDE,
        ),
        _entry(
            94,
            "Contained ECC error",
            "An uncorrectable ECC error was contained to the application that touched the memory.",
            "hardware",
            "Restart the affected application (others on the GPU are unaffected); reset the GPU when "
            "convenient so the row is remapped.",
            False,
            MEMORY_ERRORS,
        ),
        _entry(
            95,
            "Uncontained ECC error",
            "An uncorrectable ECC error that could not be contained: every "
            "application on the GPU is affected.",
            "hardware",
            "Drain the node and reset the GPU before reuse; service it if it recurs.",
            True,
            MEMORY_ERRORS,
        ),
        _entry(
            119,
            "GSP RPC timeout",
            "The GPU System Processor did not answer the driver in time.",
            "driver",
            "Drain the node; reset the GPU or reboot the node; update the driver if it recurs.",
            True,
            CATALOG,
        ),
        _entry(
            120,
            "GSP error",
            "The GPU System Processor reported an error.",
            "driver",
            "Drain the node; reset the GPU or reboot; collect `nvidia-bug-report.sh`.",
            True,
            CATALOG,
        ),
        _entry(
            154,
            "GPU recovery action changed",
            "The driver states the recovery this GPU now needs (e.g. GPU "
            "reset required, node reboot required, drain P2P).",
            "follow-on",
            "Do the recovery action the message names; look at the Xid that triggered it.",
            True,
            CATALOG,
        ),
    )
}

_KERNEL_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\): "
    r"(?P<code>\d{1,4}),\s*(?P<rest>.*)$"
)
_PID = re.compile(r"pid=(?P<pid>'?<?[\w]+>?'?)")
_FREE_TEXT_XID = re.compile(r"\bxids?\b[\s:=#(]*(\d{1,4}(?:\s*[,/&]\s*\d{1,4})*)", re.IGNORECASE)


def lookup(code: int) -> XidInfo:
    """The table entry, or an explicit unknown: never a guessed meaning."""
    if code in XID_TABLE:
        return XID_TABLE[code]
    return XidInfo(
        code=code,
        name="unknown",
        meaning=f"Xid {code} is not in our table.",
        usual_cause="unknown",
        action=f"Look Xid {code} up in NVIDIA's Xid catalog for this GPU and driver.",
        drain=False,
        known=False,
        source=CATALOG,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelXid:
    """One parsed `NVRM: Xid` kernel line."""

    code: int
    gpu_pci: str
    pid: str | None
    message: str
    line: str


def parse_kernel_xids(text: str, *, limit: int = 1000) -> list[KernelXid]:
    """Every `NVRM: Xid (PCI:...): <code>, ...` line in dmesg/journal text, up to `limit`."""
    found: list[KernelXid] = []
    for line in text.splitlines():
        at = line.find("NVRM: Xid")
        if at < 0:
            continue
        match = _KERNEL_XID.search(line[at:])
        if not match:
            continue
        rest = match.group("rest")
        pid_match = _PID.search(rest)
        message = re.sub(r"^(pid=[^,]*,\s*)?(name=[^,]*,\s*)?", "", rest).strip()
        found.append(
            KernelXid(
                code=int(match.group("code")),
                gpu_pci=match.group("pci").lower(),
                pid=pid_match.group("pid").strip("'") if pid_match else None,
                message=message,
                line=line.strip()[:500],
            )
        )
        if len(found) >= limit:
            break
    return found


def xids_in_text(text: str | None) -> list[int]:
    """Xid codes mentioned in free text ("Xid 79 ...", "XID:48", "xids 79, 94"), in order, unique."""
    if not text:
        return []
    codes: list[int] = []
    for match in _FREE_TEXT_XID.finditer(text):
        for number in re.findall(r"\d{1,4}", match.group(1)):
            if int(number) not in codes:
                codes.append(int(number))
    return codes
