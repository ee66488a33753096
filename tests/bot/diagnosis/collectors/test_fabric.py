"""Fabric scope from NCCL logs: the lab's two-host scenario lands on the right pair; published lines parse."""

from __future__ import annotations

import pytest

from bot.diagnosis.collectors.fabric import nccl as fabric
from bot.evidence.findings import utcnow
from tests.support.paths import FIXTURES

FIXTURES = FIXTURES / "fabric"
LAB = FIXTURES / "lab-nccl-ib"
PUBLISHED = FIXTURES / "published"
IB_LINE = (
    "{host}:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer {peer_ip}<54862> "
    "with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{ip} remoteGids ::ffff:{peer_ip} "
    "hca mlx5_{hca}"
)


def _scope(observations: list) -> dict:
    return next(item for item in observations if item.kind == "fabric_scope").fields


def test_the_labs_nccl_scenario_is_path_local_between_node_03_and_node_07() -> None:
    logs = {path.stem: path.read_text() for path in sorted(LAB.glob("*.log"))}
    observations = fabric.fabric_observations(logs=logs, observed_at=utcnow(), subject="ml/train-llm")
    scope = _scope(observations)
    assert scope["scope"] == "path-local"
    assert scope["pair"] == ["gpu-node-03", "gpu-node-07"]
    assert scope["suspect_hca"] == "mlx5_2"
    completions = [item.fields for item in observations if item.fields.get("error_type") == "ib_completion"]
    assert {(item["host"], item["peer_host"]) for item in completions} == {
        ("gpu-node-03", "gpu-node-07"),
        ("gpu-node-07", "gpu-node-03"),
    }
    assert {item["status_text"] for item in completions} == {"IBV_WC_RETRY_EXC_ERR"}


def test_the_live_lab_scenario_when_this_build_has_the_lab() -> None:
    scenarios = pytest.importorskip("bot.lab.scenarios")
    if not hasattr(scenarios, "nccl_ib"):
        pytest.skip("this build's lab has no nccl_ib scenario")
    scenario = scenarios.nccl_ib()
    logs: dict[str, str] = {}
    for (namespace, pod, _container, _previous), text in scenario.state.logs.items():
        if namespace == "ml" and pod.startswith("train-llm-") and not pod.startswith("train-llm-ok"):
            host = text.split(":", 1)[0]
            logs[host] = logs.get(host, "") + text
    scope = _scope(fabric.fabric_observations(logs=logs, observed_at=utcnow()))
    assert (scope["scope"], scope["pair"]) == ("path-local", ["gpu-node-03", "gpu-node-07"])


def test_peers_are_mapped_to_hosts_from_nccls_own_oob_lines() -> None:
    table = fabric.learn_ip_hosts(
        (LAB / "gpu-node-03.log").read_text() + (LAB / "gpu-node-07.log").read_text()
    )
    assert table == {"10.0.1.13": "gpu-node-03", "10.0.1.17": "gpu-node-07"}


def test_a_published_ib_completion_line_gives_peer_status_vendor_error_and_gids() -> None:
    [event] = fabric.parse_nccl_log((PUBLISHED / "nccl-1405-ib-completion.log").read_text(), host="node-a")
    assert event.error_type == "ib_completion"
    assert event.host == "kp-ddp-worker-0"
    assert (event.peer_ip, event.peer, event.status, event.vendor_err) == (
        "10.216.210.236",
        "10.216.210.236<54862>",
        12,
        129,
    )
    assert event.remote_gid == "fd00:1148:9000:5000:4:200:3:ff1f"
    assert event.device == 4


def test_watchdog_timeouts_give_rank_op_size_and_timeout_but_do_not_pretend_to_localise() -> None:
    text = (PUBLISHED / "watchdog-llamafactory-7396.log").read_text()
    events = fabric.parse_nccl_log(text, host="trainer-0")
    assert [(e.rank, e.op_type, e.seq_num, e.numel_in, e.timeout_ms) for e in events] == [
        (0, "ALLREDUCE", 1580, 466119168, 600000),
        (4, "ALLREDUCE", 1580, 466119168, 600000),
    ]
    decision = fabric.decide_scope(events)
    assert decision.scope == "unknown"
    assert "timeouts" in decision.reason


def test_the_older_watchdog_format_without_sizes_parses() -> None:
    events = fabric.parse_nccl_log((PUBLISHED / "watchdog-ofa-271-older-format.log").read_text(), host="n1")
    assert [(e.rank, e.timeout_ms, e.numel_in) for e in events] == [(1, 1800000, None), (3, 1800000, None)]


def test_one_host_on_every_failing_path_is_node_local() -> None:
    ips = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3", "d": "10.0.0.4"}
    logs = {
        host: IB_LINE.format(host=host, ip=ips[host], peer_ip=ips["a"], hca=1) for host in ("b", "c", "d")
    }
    logs["a"] = IB_LINE.format(host="a", ip=ips["a"], peer_ip=ips["b"], hca=3)
    observations = fabric.fabric_observations(
        logs=logs, observed_at=utcnow(), ip_hosts={ip: host for host, ip in ips.items()}
    )
    scope = _scope(observations)
    assert (scope["scope"], scope["suspect_host"], scope["suspect_hca"]) == ("node-local", "a", "mlx5_3")


def test_errors_on_unrelated_pairs_are_fabric_wide() -> None:
    ips = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3", "d": "10.0.0.4"}
    logs = {
        "a": IB_LINE.format(host="a", ip=ips["a"], peer_ip=ips["b"], hca=0),
        "c": IB_LINE.format(host="c", ip=ips["c"], peer_ip=ips["d"], hca=0),
    }
    scope = _scope(
        fabric.fabric_observations(
            logs=logs, observed_at=utcnow(), ip_hosts={ip: host for host, ip in ips.items()}
        )
    )
    assert scope["scope"] == "fabric-wide"
    assert scope["hosts"] == ["a", "b", "c", "d"]


def test_socket_errors_are_marked_so_the_socket_rule_can_match() -> None:
    line = (
        "node-1:100:200 [0] misc/socket.cc:49 NCCL WARN NET/Socket : socketProgressOpt: Connection closed by "
        "remote peer node-2<46392>"
    )
    [event] = fabric.parse_nccl_log(line, host="node-1")
    assert (event.error_type, event.op) == ("socket", "socket")


def test_ranks_are_placed_on_hosts_when_the_log_line_has_no_host() -> None:
    events = fabric.parse_nccl_log((PUBLISHED / "watchdog-ofa-271-older-format.log").read_text(), host="")
    placed = fabric.resolve_peers(events, ip_hosts={}, rank_hosts={1: "gpu-node-01", 3: "gpu-node-02"})
    assert [event.host for event in placed] == ["gpu-node-01", "gpu-node-02"]


def test_an_event_cap_bounds_the_work_on_a_huge_log() -> None:
    line = (PUBLISHED / "nccl-1405-ib-completion.log").read_text().strip()
    assert len(fabric.parse_nccl_log("\n".join([line] * 5000), host="x", max_events=10)) == 10


def test_ib_errors_get_the_global_rank_of_the_process_that_logged_them() -> None:
    init = (PUBLISHED / "nccl-init-ranks-nccl-tests-29.log").read_text()
    assert fabric.learn_process_ranks(init) == {
        ("server2", 23920): 15,
        ("server3", 15217): 17,
        ("server2", 23914): 9,
    }
    # The same process (server2 pid 23920) later reports a completion error in the published line's format.
    error = IB_LINE.format(host="server2", ip="10.0.0.2", peer_ip="10.0.0.3", hca=1).replace(
        "server2:3468:3905", "server2:23920:24013"
    )
    observations = fabric.fabric_observations(
        logs={"server2": init + error + "\n"}, observed_at=utcnow(), ip_hosts={"10.0.0.3": "server3"}
    )
    event = next(item for item in observations if item.kind == "nccl_error").fields
    assert (event["rank"], event["host"], event["peer_host"]) == (15, "server2", "server3")


REAL = FIXTURES / "h200-nccl-2.28.9"


def test_a_real_nccl_2_28_log_gives_rank_from_its_init_line_and_ip_from_its_oob_line() -> None:
    text = (REAL / "nccl-1rank.log").read_text()
    assert fabric.learn_process_ranks(text) == {("vm", 412): 0}
    assert fabric.learn_ip_hosts(text) == {"192.0.2.2": "vm"}
    assert fabric.parse_nccl_log(text, host="vm") == []  # a healthy run has no fabric events


def test_a_real_nccl_warn_with_the_new_timestamp_prefix_keeps_host_pid_and_device() -> None:
    events = fabric.parse_nccl_log((REAL / "nccl-2rank-r0.log").read_text(), host="pod-0")
    warn = next(event for event in events if "Duplicate GPU detected" in event.line)
    assert (warn.error_type, warn.host, warn.pid, warn.device) == ("nccl_error", "vm", 445, 0)
    assert any(event.line.startswith("torch.distributed.DistBackendError: NCCL error") for event in events)
    decision = fabric.decide_scope(events)
    assert decision.scope == "unknown"  # a usage error is not a transport error: no fabric scope claimed
