"""Log lines are named (NCCL host/peer/HCA pulled out) and events are de-duplicated newest first."""

from __future__ import annotations

from bot.diagnosis.collectors.kube.events import deduplicate
from bot.diagnosis.collectors.kube.logs import classify_line


def test_an_nccl_ib_warning_names_host_peer_and_hca() -> None:
    fields = classify_line("node-a:1:2 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                           "10.0.1.17<52431> (node-b) with status=12 vendor err 129 hca mlx5_2")
    assert fields is not None
    assert (fields["pattern"], fields["host"], fields["peer"], fields["peer_ip"], fields["hca"]) == (
        "nccl_warn", "node-a", "node-b", "10.0.1.17", "mlx5_2")


def test_common_failure_lines_get_their_pattern_and_quiet_lines_none() -> None:
    assert classify_line("RuntimeError: CUDA error: unspecified launch failure")["pattern"] == "cuda_error"
    assert classify_line("NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.")["pattern"] == "xid"
    assert classify_line("torch.OutOfMemoryError: CUDA out of memory")["pattern"] == "gpu_oom"
    assert classify_line("Traceback (most recent call last):")["pattern"] == "traceback"
    assert classify_line("step 12 loss 1.9") is None


def _event(reason: str, message: str, last: str, count: int = 1) -> dict:
    return {"reason": reason, "message": message, "type": "Warning", "count": count, "lastTimestamp": last,
            "firstTimestamp": last, "involvedObject": {"kind": "Pod", "name": "p"}, "metadata": {"namespace": "ns"},
            "source": {"component": "kubelet"}}


def test_events_with_the_same_reason_and_message_merge_and_count() -> None:
    merged = deduplicate([
        _event("BackOff", "restarting", "2026-01-01T00:00:10Z", 3),
        _event("FailedMount", "no volume", "2026-01-01T00:00:30Z"),
        _event("BackOff", "restarting", "2026-01-01T00:00:50Z", 2),
    ])
    assert [(item["reason"], item["count"], item["duplicates"]) for item in merged] == [
        ("BackOff", 5, 2), ("FailedMount", 1, 1)]
    assert merged[0]["last_seen"] == "2026-01-01T00:00:50Z"
    assert merged[0]["first_seen"] == "2026-01-01T00:00:10Z"
