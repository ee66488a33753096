"""GPU parsers on recorded outputs: a real H200 capture (tests/fixtures/gpu/h200) and published samples."""

from __future__ import annotations

import pytest

from bot.diagnosis.collectors.gpu import dcgmi as gpu_dcgmi
from bot.diagnosis.collectors.gpu import nvidia_smi as gpu
from bot.diagnosis.collectors.gpu import topology as gpu_topology
from bot.diagnosis.knowledge import xid as gpu_xid
from bot.evidence.findings import utcnow
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "gpu"
H200 = FIXTURES / "h200"
PUBLISHED = FIXTURES / "published"


def test_the_real_h200_xml_gives_a_healthy_gpu_with_its_versions() -> None:
    report = gpu.parse_nvidia_smi_xml((H200 / "nvidia-smi-q-x.xml").read_text(encoding="utf-8"))
    assert (report.driver_version, report.cuda_version) == ("580.159.04", "13.0")
    [state] = report.gpus
    assert state.product == "NVIDIA H200"
    assert state.pci == "00000000:00:06.0"
    assert state.index == 0
    assert state.volatile_uncorrectable == 0
    assert state.remapped_rows_pending is False and state.remapped_rows_failure is False
    assert state.memory_total_mib == 143771
    assert state.power_limit_w == 700
    assert state.status == "ok"
    assert state.problems() == []


def test_uncorrectable_ecc_and_a_row_remap_failure_make_the_gpu_failed() -> None:
    # Derived from the real capture: the same document with two counters and one flag changed.
    text = (H200 / "nvidia-smi-q-x.xml").read_text(encoding="utf-8")
    volatile_start = text.index("<volatile>")
    text = text[:volatile_start] + text[volatile_start:].replace(
        "<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>", 1
    )
    text = text.replace(
        "<remapped_row_failure>No</remapped_row_failure>", "<remapped_row_failure>Yes</remapped_row_failure>"
    )
    [state] = gpu.parse_nvidia_smi_xml(text).gpus
    assert state.volatile_uncorrectable == 2
    assert state.status == "failed"
    assert any("row remapping failure" in problem for problem in state.problems())


def test_the_older_single_and_double_bit_schema_is_read_too() -> None:
    older = """<?xml version="1.0" ?><nvidia_smi_log><driver_version>535.129.03</driver_version>
    <gpu id="00000000:3B:00.0"><product_name>NVIDIA A100-SXM4-80GB</product_name><minor_number>3</minor_number>
    <ecc_errors><volatile><single_bit><total>4</total></single_bit><double_bit><total>1</total></double_bit>
    </volatile></ecc_errors><power_readings><power_draw>250.5 W</power_draw><power_limit>400.00 W</power_limit>
    </power_readings><clocks_throttle_reasons><clocks_throttle_reason_hw_slowdown>Active
    </clocks_throttle_reason_hw_slowdown></clocks_throttle_reasons></gpu></nvidia_smi_log>"""
    [state] = gpu.parse_nvidia_smi_xml(older).gpus
    assert (state.volatile_correctable, state.volatile_uncorrectable) == (4, 1)
    assert (state.power_draw_w, state.power_limit_w) == (250.5, 400.0)
    assert state.clock_event_reasons == ("hw_slowdown",)
    assert state.pci == "00000000:3b:00.0"


def test_xml_that_declares_entities_is_refused() -> None:
    hostile = (
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
        "<nvidia_smi_log><gpu><product_name>&e;</product_name></gpu></nvidia_smi_log>"
    )
    with pytest.raises(gpu.GpuParseError, match="entities"):
        gpu.parse_nvidia_smi_xml(hostile)


def test_text_that_is_not_nvidia_smi_xml_is_a_clear_error() -> None:
    with pytest.raises(gpu.GpuParseError, match="not nvidia-smi XML"):
        gpu.parse_nvidia_smi_xml(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        )


def test_the_real_single_gpu_topology_has_no_peers_and_keeps_cpu_affinity_despite_ansi_escapes() -> None:
    topology = gpu_topology.parse_topology((H200 / "nvidia-smi-topo-m.txt").read_text(encoding="utf-8"))
    assert topology.gpus == ("GPU0",)
    assert topology.nics == ()
    assert topology.cpu_affinity == {"GPU0": "0-15"}
    assert topology.nvlink_pairs == []
    assert topology.problems() == []


def test_an_eight_gpu_nvlink_topology_gives_pairs_and_each_gpus_nearest_nic() -> None:
    topology = gpu_topology.parse_topology(
        (PUBLISHED / "nvidia-smi-topo-m-8xh100-sglang-13973.txt").read_text()
    )
    assert len(topology.gpus) == 8 and len(topology.nics) == 9
    assert ("GPU0", "GPU1", 18) in topology.nvlink_pairs
    assert topology.nearest_nic("GPU0") == ("NIC0", "PIX")
    assert topology.nearest_nic("GPU3") == ("NIC4", "PIX")
    assert topology.numa_affinity["GPU4"] == "2"


def test_a_gpu_without_nvlink_on_an_nvlink_node_is_named() -> None:
    text = (PUBLISHED / "nvidia-smi-topo-m-8xh100-sglang-13973.txt").read_text()
    rows = text.splitlines()
    # Derived: GPU5's links to its peers reported as SYS, as when its NVLinks are down.
    rows[6] = rows[6].replace("NV18", "SYS ")
    rows = [
        row
        if not row.startswith("GPU") or row.startswith("GPU5")
        else _replace_column(row, column=6, value="SYS")
        for row in rows
    ]
    topology = gpu_topology.parse_topology("\n".join(rows))
    assert "GPU5 has no NVLink to any other GPU on an NVLink node" in topology.problems()


def _replace_column(row: str, *, column: int, value: str) -> str:
    cells = row.split()
    cells[column] = value
    return "    ".join(cells)


def test_dcgmi_json_from_dcgm_3_lists_every_test_and_skips_the_nulls() -> None:
    report = gpu_dcgmi.parse_dcgmi_diag((PUBLISHED / "dcgmi-diag-3.1.0-8gpu.json").read_text())
    assert report.metadata["version"] == "3.1.0"
    assert len(report.results) == 9 + 8
    assert {item.result for item in report.results} == {"Pass"}
    assert report.failed == []


def test_dcgmi_text_keeps_metadata_and_wrapped_info_rows() -> None:
    report = gpu_dcgmi.parse_dcgmi_diag((PUBLISHED / "dcgmi-diag-r3-h100-nccl-tests-264.txt").read_text())
    assert report.metadata["Driver Version Detected"] == "560.35.03"
    persistence = next(item for item in report.results if item.test == "Persistence Mode")
    assert persistence.details == ("Info: Persistence mode for GPU 0 is disabled. Enable persistence mode",)
    assert {item.category for item in report.results} == {"Deployment"}


def test_a_failed_dcgmi_test_becomes_a_gpu_health_observation() -> None:
    text = (
        (PUBLISHED / "dcgmi-diag-r2-fail-go-dcgm-52.txt")
        .read_text()
        .replace("| Page Retirement/Row Remap | Pass ", "| Page Retirement/Row Remap | Fail ")
    )
    report = gpu_dcgmi.parse_dcgmi_diag(text)
    observations = gpu.gpu_observations(node="gpu-node-05", observed_at=utcnow(), diag=report)
    assert [item.fields["test"] for item in observations] == ["Page Retirement/Row Remap"]
    assert observations[0].fields["status"] == "failed"


def test_kernel_xid_lines_become_gpu_xid_observations_with_meaning_action_and_source() -> None:
    log = (
        "[ 4321.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, name=python, GPU has fallen off the bus.\n"
        "[ 4400.2] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, "
        "reset gpu to activate.\n"
        "[ 4500.3] NVRM: Xid (PCI:0000:3b:00): 999, pid='<unknown>', name=<unknown>, something new\n"
    )
    observations = gpu.gpu_observations(node="gpu-node-05", observed_at=utcnow(), kernel_log=log)
    by_code = {item.fields["xid"]: item.fields for item in observations}
    assert by_code[79]["drain"] is True and by_code[79]["gpu_pci"] == "0000:3b:00"
    assert by_code[79]["pid"] == "48213"
    assert by_code[63]["drain"] is False and "reset" in by_code[63]["action"].lower()
    assert by_code[999]["known"] is False and by_code[999]["name"] == "unknown"
    assert all(item["xid_source"].startswith("https://docs.nvidia.com/") for item in by_code.values())


def test_the_real_h200_kernel_log_has_nvrm_lines_but_no_xid() -> None:
    text = (FIXTURES / "h200-vm-1gpu" / "dmesg-nvrm.txt").read_text()
    assert "NVRM" in text
    assert gpu_xid.parse_kernel_xids(text) == []


def test_placement_names_driver_cuda_and_product() -> None:
    report = gpu.parse_nvidia_smi_xml((H200 / "nvidia-smi-q-x.xml").read_text(encoding="utf-8"))
    assert gpu.gpu_placement(report) == {
        "gpu_driver": "580.159.04",
        "cuda_driver": "13.0",
        "gpu_products": "NVIDIA H200",
        "gpu_count": "1",
    }
