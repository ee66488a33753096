"""The Xid table: the codes the issue names map to the documented action, each with a source."""

from __future__ import annotations

import pytest

from bot.diagnosis.knowledge import xid as gpu_xid


@pytest.mark.parametrize(
    ("code", "drain", "cause", "words"),
    [
        (79, True, "hardware", "service"),
        (48, True, "hardware", "drain"),
        (94, False, "hardware", "restart the affected application"),
        (95, True, "hardware", "reset the gpu"),
        (63, False, "hardware", "remap"),
        (64, True, "hardware", "row remapping failed"),
        (31, False, "application", "application"),
        (13, False, "application", "debug the application"),
        (43, False, "application", "restart the application"),
        (74, True, "fabric", "nvlink"),
    ],
)
def test_the_codes_the_issue_names_have_the_documented_action(
    code: int, drain: bool, cause: str, words: str
) -> None:
    info = gpu_xid.lookup(code)
    assert info.known
    assert info.drain is drain
    assert info.usual_cause == cause
    assert words in info.action.lower()


def test_every_entry_cites_an_nvidia_document() -> None:
    assert all(info.source.startswith("https://docs.nvidia.com/") for info in gpu_xid.XID_TABLE.values())


def test_an_unknown_code_is_shown_as_unknown_not_guessed() -> None:
    info = gpu_xid.lookup(4242)
    assert not info.known
    assert info.name == "unknown"
    assert info.drain is False
    assert "not in our table" in info.meaning


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Xid 79 GPU has fallen off the bus (PCI:0000:3b:00)", [79]),
        ("NHC: XID:48 on GPU 3", [48]),
        ("xids 79, 94 seen", [79, 94]),
        (
            "kernel Xid (PCI:0000:3b:00): 74",
            [],
        ),  # a kernel line is parsed by parse_kernel_xids, not guessed here
        ("Not responding", []),
        (None, []),
    ],
)
def test_xids_are_found_in_drain_reasons(text: str | None, codes: list[int]) -> None:
    assert gpu_xid.xids_in_text(text) == codes


def test_kernel_lines_with_and_without_the_pci_prefix_parse() -> None:
    events = gpu_xid.parse_kernel_xids(
        "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n"
        "NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff\n"
    )
    assert [(event.code, event.gpu_pci) for event in events] == [(79, "0000:2b:00"), (3, "0000:01:00")]
    assert events[0].message == "GPU has fallen off the bus."
