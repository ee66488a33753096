"""`/triage compare`, `/triage job <id> compare <healthy>` and `/triage fabric` through the real server, the
Slack stand-in and the lab Kubernetes API server (the real `kubernetes` client talks to it)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings
from bot.diagnosis.compare import Difference
from bot.diagnosis.service import diagnose
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import ACCEPTED_FORMS, Target
from handlers.slack.blocks import compare as compare_blocks
from handlers.slack.blocks.limits import problems as validate_blocks
from tests.support.kube_lab import Lab, running_lab
from tests.support.paths import FIXTURES
from tests.support.slack import BotUnderTest, make_bot, serving


@pytest.fixture
def bot_on_scenario(request: pytest.FixtureRequest, slack_stand_in, tmp_path: Path) -> Iterator[tuple[BotUnderTest, Lab]]:
    """The bot with its diagnoser bound to the lab scenario named by the test's parameter."""
    with running_lab(tmp_path=tmp_path, scenario=request.param) as lab:

        def lab_diagnoser(*, target: Target, settings: Settings) -> SnapshotReport:
            del settings
            return diagnose(target=target, settings=lab.settings(deadline_seconds=5.0, call_timeout_seconds=2.0))

        built = make_bot(
            database_url=f"sqlite:///{tmp_path / 'compare.db'}", slack=slack_stand_in, diagnoser=lab_diagnoser
        )
        with serving(built, slack=slack_stand_in) as running:
            yield running, lab


def _thread_posts(bot: BotUnderTest) -> list[dict]:
    return [call.params for call in bot.slack.calls_to("chat.postMessage") if call.params.get("thread_ts")]


def _everything_posted(bot: BotUnderTest) -> str:
    return json.dumps([call.params for call in bot.slack.calls])


@pytest.mark.parametrize("bot_on_scenario", ["oom", "nccl-ib"], indirect=True)
def test_compare_on_an_open_incident_posts_a_ranked_diff_naming_a_real_difference(bot_on_scenario) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None
    bot.command(f"job {lab.scenario.target}")
    bot.slack.clear()
    bot.command(f"compare INC-0001 {lab.scenario.healthy_target}")
    diff = next(post for post in _thread_posts(bot) if "difference(s) between" in post["text"])
    rendered = json.dumps(diff["blocks"])
    assert validate_blocks(diff["blocks"]) == []
    assert "container_state" in rendered and "placement" in rendered  # the failing pods ended differently
    assert "gpu-node-01, gpu-node-02" in rendered  # where the healthy sibling ran
    (entry,) = [item for item in bot.services.incidents.timeline("INC-0001") if item.kind == "comparison"]
    assert entry.data["healthy"] == lab.scenario.healthy_target and entry.data["count"] >= 2


@pytest.mark.parametrize("bot_on_scenario", ["nccl-ib"], indirect=True)
def test_job_with_compare_opens_the_incident_then_diffs_against_the_healthy_sibling(bot_on_scenario) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None
    bot.command(f"job {lab.scenario.target} compare {lab.scenario.healthy_target}")
    diff = next(post for post in _thread_posts(bot) if "difference(s) between" in post["text"])
    rendered = json.dumps(diff["blocks"])
    assert "nccl" in rendered and "2.21.5" in rendered  # the failing run's NCCL version, absent on the healthy
    kinds = [item.kind for item in bot.services.incidents.timeline("INC-0001")]
    assert kinds.index("snapshot") < kinds.index("comparison")


@pytest.mark.parametrize("bot_on_scenario", ["oom"], indirect=True)
@pytest.mark.parametrize("text", ["compare INC-0001 ml/../etc", "job ml/train-llm compare not a target",
                                  "compare ml/UPPER"])
def test_a_bad_healthy_id_is_refused_before_the_ack_with_the_accepted_forms(bot_on_scenario, text: str) -> None:
    bot, _lab = bot_on_scenario
    response = bot.command(text)
    assert response.status_code == 200
    assert "job, jobset, pytorchjob, aiperfjob" in response.text, response.text
    assert bot.slack.calls_to("chat.postMessage") == []  # nothing was opened or snapshotted
    assert bot.services.incidents.list_open() == []
    assert ACCEPTED_FORMS.startswith("`namespace/name`")


@pytest.mark.parametrize("bot_on_scenario", ["oom"], indirect=True)
def test_a_healthy_workload_that_does_not_exist_is_a_clear_thread_message_and_a_timeline_entry(
    bot_on_scenario,
) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None
    bot.command(f"job {lab.scenario.target}")
    bot.slack.clear()
    bot.command("compare ml/no-such-run")
    last = _thread_posts(bot)[-1]["text"]
    assert last.startswith("No comparison with `ml/no-such-run`") and "Traceback" not in _everything_posted(bot)
    kinds = [item.kind for item in bot.services.incidents.timeline("INC-0001")]
    assert "comparison_failed" in kinds and "comparison" not in kinds


@pytest.mark.parametrize("bot_on_scenario", ["oom"], indirect=True)
def test_an_unreachable_cluster_during_compare_is_explained_not_raised(bot_on_scenario) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None
    bot.command(f"job {lab.scenario.target}")
    lab.server.stop()
    bot.slack.clear()
    bot.command(f"compare {lab.scenario.healthy_target}")
    last = _thread_posts(bot)[-1]["text"]
    assert last.startswith(f"No comparison with `{lab.scenario.healthy_target}`")
    assert "Traceback" not in _everything_posted(bot)


@pytest.mark.parametrize("bot_on_scenario", ["nccl-ib"], indirect=True)
def test_fabric_names_the_path_between_the_two_hosts_with_hca_and_evidence_lines(bot_on_scenario) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None
    bot.command(f"job {lab.scenario.target}")
    bot.slack.clear()
    bot.command("fabric INC-0001")
    (post,) = _thread_posts(bot)
    rendered = json.dumps(post["blocks"])
    assert validate_blocks(post["blocks"]) == []
    assert "Scope: path-local" in rendered
    assert "path: `gpu-node-03` \\u21c4 `gpu-node-07`" in rendered
    assert "mlx5_2" in rendered and "IBV_WC_RETRY_EXC_ERR" in rendered and "NCCL WARN NET/IB" in rendered
    (entry,) = [item for item in bot.services.incidents.timeline("INC-0001") if item.kind == "fabric_scope"]
    assert entry.data["scope"]["pair"] == ["gpu-node-03", "gpu-node-07"]


@pytest.mark.parametrize("bot_on_scenario", ["oom"], indirect=True)
def test_fabric_on_a_workload_without_nccl_errors_says_the_logs_do_not_implicate_it(bot_on_scenario) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None
    bot.command(f"job {lab.scenario.target}")
    bot.slack.clear()
    bot.command("fabric")
    (post,) = _thread_posts(bot)
    assert "No NCCL transport error" in json.dumps(post["blocks"])


@pytest.mark.parametrize("bot_on_scenario", ["nccl-ib"], indirect=True)
def test_fabric_probe_without_a_runner_says_what_to_configure_and_runs_nothing(
    bot_on_scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None and bot.services.settings.node_probe_runner == "off"
    started: list[object] = []
    from bot.diagnosis.collectors import node_probe

    monkeypatch.setattr(node_probe, "run_bounded", lambda **kwargs: started.append(kwargs))  # a spy, not a stub
    bot.command(f"job {lab.scenario.target}")
    bot.slack.clear()
    bot.command("fabric INC-0001 probe")
    last = _thread_posts(bot)[-1]["text"]
    assert last.startswith("No probe ran: no node probe runner is configured")
    assert "TRIAGE_NODE_PROBE_RUNNER=srun" in last and "TRIAGE_NODE_PROBE_IMAGE" in last
    assert started == []
    assert "fabric_probe" not in [item.kind for item in bot.services.incidents.timeline("INC-0001")]


@pytest.mark.parametrize("bot_on_scenario", ["oom"], indirect=True)
def test_fabric_takes_only_the_word_probe(bot_on_scenario) -> None:
    bot, _lab = bot_on_scenario
    response = bot.command("fabric INC-0001 probe --all-nodes")
    assert "`/triage fabric [INC-n] probe`" in response.text
    assert bot.slack.calls_to("chat.postMessage") == []


@pytest.mark.parametrize("bot_on_scenario", ["oom"], indirect=True)
def test_help_lists_compare_and_fabric(bot_on_scenario) -> None:
    bot, _lab = bot_on_scenario
    bot.command("help")
    shown = json.dumps([call.params for call in bot.slack.calls_to("chat.postEphemeral")])
    assert "compare [INC-n] &lt;healthy-id&gt;" in shown or "compare [INC-n] <healthy-id>" in shown
    assert "fabric [INC-n] [probe]" in shown and "job <id> [compare <healthy-id>]" in shown.replace("&lt;", "<").replace("&gt;", ">")


def test_a_long_diff_stays_within_slack_limits_and_the_full_diff_is_attached() -> None:
    differences = [
        Difference(category="env", key=f"NCCL_SETTING_{index}", failing="x" * 900, healthy="y", rank=8, why="differs")
        for index in range(70)
    ]
    rendered = compare_blocks.comparison(
        incident_key="INC-0009", failing="ml/a", healthy="ml/b", differences=differences
    )
    assert validate_blocks(rendered.blocks) == []
    assert rendered.attachment is not None and rendered.attachment.count("NCCL_SETTING_") == 70
    assert "x" * 900 in rendered.attachment
    assert "50 more difference(s)" in json.dumps(rendered.blocks)


IBSTAT = FIXTURES / "fabric" / "published" / "ibstat-mooncake-1999.txt"


@pytest.mark.parametrize("bot_on_scenario", ["nccl-ib"], indirect=True)
def test_fabric_probe_with_a_configured_runner_reads_ibstat_on_the_pair_within_its_cap(
    bot_on_scenario, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bot, lab = bot_on_scenario
    assert lab.scenario is not None
    bin_dir, calls = tmp_path / "bin", tmp_path / "srun-calls"
    bin_dir.mkdir()
    srun = bin_dir / "srun"  # a stand-in for Slurm's srun: records its argv, answers with a published ibstat
    srun.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncat {IBSTAT}\n')
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    bot.services.core.settings = bot.services.settings.model_copy(update={"node_probe_runner": "srun"})
    bot.command(f"job {lab.scenario.target}")
    bot.slack.clear()
    bot.command("fabric probe")
    ran = calls.read_text().splitlines()
    assert [line.split()[:2] for line in ran] == [["-w", "gpu-node-03"], ["-w", "gpu-node-07"]]
    assert all("--time=1" in line and line.endswith("-- ibstat") for line in ran)
    last = _thread_posts(bot)[-1]["text"]
    assert last.startswith("Probe (`ibstat`, 30 s cap per node) on gpu-node-03, gpu-node-07")
    assert "gpu-node-07 mlx5_10 port 1: Down" in last
    assert "fabric_probe" in [item.kind for item in bot.services.incidents.timeline("INC-0001")]
