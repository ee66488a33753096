"""A node triage reads the DCGM exporter's Xid, ECC and NVLink series from a real Prometheus (Debian's), which
scrapes a dcgm-exporter stand-in serving the exporter's exposition format for two nodes."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from bot.diagnosis.service import diagnose
from tests.support.kube_lab import running_lab
from tests.support.prometheus import PROMETHEUS, binary, free_port, running

EXPOSITION = """\
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-5c1e0e5a",pci_bus_id="00000000:9B:00.0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-05"} 79
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-0a0a0a0a",pci_bus_id="00000000:18:00.0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-02"} 0
# HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="3",UUID="GPU-5c1e0e5a",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-05"} 2
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",UUID="GPU-0a0a0a0a",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-02"} 0
# HELP DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL Total number of NVLink flow-control CRC errors.
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="5",UUID="GPU-5e5e5e5e",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-05"} 17
"""


@pytest.fixture
def exporter() -> Iterator[str]:
    """The exposition dcgm-exporter would serve for the two nodes, on a loopback port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = EXPOSITION.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def prometheus(tmp_path: Path, exporter: str) -> Iterator[str]:
    executable = binary(PROMETHEUS)
    port = free_port()
    config = {"global": {"scrape_interval": "1s"},
              "scrape_configs": [{"job_name": "dcgm-exporter", "honor_labels": True,
                                  "static_configs": [{"targets": [exporter]}]}]}
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    base = f"http://127.0.0.1:{port}"
    argv = [executable, f"--config.file={path}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}"]
    with running(argv, ready_url=f"{base}/-/ready", log=tmp_path / "prometheus.log"):
        stop = time.monotonic() + 60
        while time.monotonic() < stop:
            answer = requests.get(f"{base}/api/v1/query", params={"query": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"},
                                  timeout=5).json()
            if answer["data"]["result"]:
                break
            time.sleep(0.5)
        yield base


def test_a_node_snapshot_reads_xid_ecc_and_nvlink_from_prometheus_and_names_them(
    prometheus: str, tmp_path: Path
) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-xid") as lab:
        settings = lab.settings().model_copy(update={"prometheus_url": prometheus})
        report = diagnose(target="node:gpu-node-05", settings=settings)
    dcgm = next(item for item in report.collectors if item.name == "gpu.dcgm")
    assert dcgm.outcome.value == "ok" and dcgm.items >= 3
    xid = next(item for item in report.observations if item.kind == "gpu_xid" and item.source == "gpu")
    assert (xid.fields["xid"], xid.fields["gpu_index"], xid.fields["uuid"]) == (79, "3", "GPU-5c1e0e5a")
    rules = {item.rule for item in report.findings}
    assert {"runtime.gpu-ecc", "runtime.nvlink", "runtime.gpu-lost"} <= rules
    steps = next(item for item in report.findings if item.rule == "node.next-steps")
    assert "Xid 79" in steps.next_step or any("Xid 79" in item.excerpt for item in steps.evidence)


def test_zero_valued_series_of_a_healthy_node_add_nothing(prometheus: str, tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="node-healthy") as lab:
        settings = lab.settings().model_copy(update={"prometheus_url": prometheus})
        report = diagnose(target="node:gpu-node-02", settings=settings)
    assert report.verdict.layer is None and report.findings == ()
    assert next(item for item in report.collectors if item.name == "gpu.dcgm").items == 2
