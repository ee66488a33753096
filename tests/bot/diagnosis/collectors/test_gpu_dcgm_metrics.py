"""DCGM exporter series read from a Prometheus HTTP API stand-in on loopback (the real wire format)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from bot.diagnosis.collectors.gpu import dcgm_metrics
from bot.evidence.findings import utcnow

SERIES = {
    "DCGM_FI_DEV_XID_ERRORS": [
        ("gpu-node-05", "3", "79"),
        ("gpu-node-05", "4", "0"),
        ("gpu-node-06", "0", "0"),
    ],
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": [("gpu-node-05", "3", "2")],
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": [("gpu-node-05", "3", "1")],
}


class _Prometheus(BaseHTTPRequestHandler):
    queries: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
        type(self).queries.append(query)
        metric = query.split("{", 1)[0]
        result = [
            {
                "metric": {
                    "__name__": metric,
                    "Hostname": host,
                    "gpu": gpu,
                    "UUID": f"GPU-{host}-{gpu}",
                    "pci_bus_id": f"00000000:{int(gpu) + 0x19:02X}:00.0",
                },
                "value": [1795990000.123, value],
            }
            for host, gpu, value in SERIES.get(metric, [])
        ]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def prometheus() -> Iterator[str]:
    _Prometheus.queries = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_nonzero_last_xid_and_remap_failure_become_observations(prometheus: str) -> None:
    samples = dcgm_metrics.query_node_series(
        prometheus_url=prometheus, nodes=["gpu-node-05", "gpu-node-06"], timeout_seconds=5
    )
    observations = dcgm_metrics.dcgm_observations(
        samples=samples, observed_at=utcnow(), prometheus_url=prometheus
    )
    xids = [item.fields for item in observations if item.kind == "gpu_xid"]
    assert [(item["node"], item["gpu_index"], item["xid"], item["drain"]) for item in xids] == [
        ("gpu-node-05", "3", 79, True)
    ]
    health = {
        item.fields["metric"]: item.fields["status"] for item in observations if item.kind == "gpu_health"
    }
    assert health == {
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "degraded",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": "failed",
    }
    assert all('Hostname=~"gpu-node-05|gpu-node-06"' in query for query in _Prometheus.queries)


def test_dots_in_node_names_are_escaped_for_promql(prometheus: str) -> None:
    dcgm_metrics.query_node_series(prometheus_url=prometheus, nodes=["n1.cluster"], timeout_seconds=5)
    assert 'Hostname=~"n1\\\\.cluster"' in _Prometheus.queries[0]


def test_node_names_that_could_inject_promql_are_dropped(prometheus: str) -> None:
    assert (
        dcgm_metrics.query_node_series(
            prometheus_url=prometheus, nodes=['x"} or vector(1) #'], timeout_seconds=5
        )
        == []
    )
    assert _Prometheus.queries == []


def test_an_unreachable_prometheus_is_a_clear_error() -> None:
    with pytest.raises(dcgm_metrics.MetricsUnavailable, match="unreachable"):
        dcgm_metrics.query_node_series(prometheus_url="http://127.0.0.1:9", nodes=["n1"], timeout_seconds=2)


@pytest.mark.slurm
@pytest.mark.skipif(
    __import__("shutil").which("sinfo") is None, reason="Slurm client tools are not installed"
)
def test_a_slurm_triage_reads_dcgm_series_for_the_jobs_node(prometheus: str, tmp_path: object) -> None:
    import subprocess

    from bot.config import load_settings
    from bot.diagnosis.service import diagnose

    SERIES["DCGM_FI_DEV_XID_ERRORS"].append(("localhost", "1", "48"))
    done = subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", "-p", "small", "-t", "2", "--wrap", "sleep 60"],
        capture_output=True,
        text=True,
        timeout=15,
        check=True,
        cwd=str(tmp_path),
    )
    job_id = done.stdout.strip()
    for _ in range(60):  # bounded wait until the scheduler has placed it
        state = subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
        if state == "RUNNING":
            break
        __import__("time").sleep(0.5)
    try:
        report = diagnose(target=job_id, settings=load_settings(TRIAGE_PROMETHEUS_URL=prometheus))
    finally:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=15, check=False)
        SERIES["DCGM_FI_DEV_XID_ERRORS"].pop()
    xids = [
        (item.fields["node"], item.fields["xid"]) for item in report.observations if item.kind == "gpu_xid"
    ]
    assert ("localhost", 48) in xids
    assert any('Hostname=~"localhost"' in query for query in _Prometheus.queries)
    assert next(item for item in report.collectors if item.name == "gpu.dcgm").outcome.value == "ok"
