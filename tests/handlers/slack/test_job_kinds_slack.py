"""`/triage job <id>` for every new id form, through the one app builder, the Slack stand-in and the lab cluster
(the real `kubernetes` client talks to it): each kind opens an incident whose thread carries its verdict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings
from bot.diagnosis.service import diagnose
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from handlers.slack.blocks.limits import problems as validate_blocks
from tests.support.kube_lab import Lab, running_lab
from tests.support.slack import BotUnderTest, make_bot, serving


@pytest.fixture
def bot_on_scenario(request: pytest.FixtureRequest, slack_stand_in, tmp_path: Path) -> Iterator[tuple[BotUnderTest, Lab]]:
    """The bot with its diagnoser bound to the lab scenario named by the test's parameter."""
    with running_lab(tmp_path=tmp_path, scenario=request.param) as lab:

        def lab_diagnoser(*, target: Target, settings: Settings) -> SnapshotReport:
            del settings
            return diagnose(target=target, settings=lab.settings(deadline_seconds=8.0, call_timeout_seconds=3.0))

        built = make_bot(database_url=f"sqlite:///{tmp_path / 'kinds.db'}", slack=slack_stand_in,
                         diagnoser=lab_diagnoser)
        with serving(built, slack=slack_stand_in) as running:
            yield running, lab


def _thread_posts(bot: BotUnderTest) -> list[dict]:
    return [call.params for call in bot.slack.calls_to("chat.postMessage") if call.params.get("thread_ts")]


def _findings_post(bot: BotUnderTest) -> dict:
    return next(post for post in _thread_posts(bot) if "Findings:" in json.dumps(post.get("blocks") or []))


@pytest.mark.parametrize(("bot_on_scenario", "typed", "key", "verdict"), [
    ("vllm-crashloop", "deployment/serving/vllm-llama", "deployment/serving/vllm-llama", "`workflow`"),
    ("vllm-crashloop", "deploy/serving/vllm-llama", "deployment/serving/vllm-llama", "`workflow`"),
    ("statefulset-nfs", "sts/serving/triton-ensemble", "statefulset/serving/triton-ensemble", "`fabric`"),
    ("cronjob-latest", "cronjob/ml/nightly-eval", "cronjob/ml/nightly-eval", "`workflow`"),
    ("rayjob-pending", "rayjob/ml/rl-tune", "rayjob/ml/rl-tune", "`scheduler`"),
    ("inferenceservice-oom", "isvc/serving/llama-isvc", "inferenceservice/serving/llama-isvc", "`runtime`"),
    ("bare-pod", "pod/ml/gpu-smoke", "pod/ml/gpu-smoke", "`runtime`"),
    ("unknown-crd", "modelservers.serving.example.com/serving/llama-srv",
     "modelservers.serving.example.com/serving/llama-srv", "`workflow`"),
    ("healthy-serving", "deployment/serving/vllm-chat", "deployment/serving/vllm-chat", "no current failure"),
], indirect=["bot_on_scenario"])
def test_job_with_each_new_id_form_opens_an_incident_and_threads_its_verdict(
        bot_on_scenario, typed: str, key: str, verdict: str) -> None:
    bot, _lab = bot_on_scenario
    response = bot.command(f"job {typed}")
    assert response.status_code == 200
    (incident,) = bot.services.incidents.list_open()
    assert incident.target == key
    post = _findings_post(bot)
    assert validate_blocks(post["blocks"]) == []
    rendered = json.dumps(post["blocks"])
    assert f"Verdict: {verdict}" in rendered, rendered[:600]


@pytest.mark.parametrize("bot_on_scenario", ["pending-node-no-driver"], indirect=True)
def test_the_findings_name_the_hop_to_the_claimed_node(bot_on_scenario) -> None:
    bot, _lab = bot_on_scenario
    bot.command("job ml/train-llm")
    rendered = json.dumps(_findings_post(bot)["blocks"])
    assert "Verdict: `runtime`" in rendered
    assert "followed one hop" in rendered and "nodeclaim/gpu-h100-x7k2p" in rendered


@pytest.mark.parametrize("bot_on_scenario", ["unknown-crd"], indirect=True)
def test_an_unknown_kind_typed_as_namespace_slash_name_is_told_how_to_name_it(bot_on_scenario) -> None:
    bot, _lab = bot_on_scenario
    bot.command("job serving/llama-srv")
    shown = json.dumps([call.params for call in bot.slack.calls])
    assert "plural.group/namespace/name" in shown
    assert "Traceback" not in shown


@pytest.mark.parametrize("bot_on_scenario", ["nccl-path-hostnames"], indirect=True)
def test_fabric_on_logs_that_name_pod_hostnames_names_the_node_pair(bot_on_scenario) -> None:
    bot, _lab = bot_on_scenario
    bot.command("job pytorchjob/ml/train-llm")
    bot.slack.clear()
    bot.command("fabric INC-0001")
    (post,) = _thread_posts(bot)
    rendered = json.dumps(post["blocks"])
    assert "Scope: path-local" in rendered
    assert "`gpu-node-03`" in rendered and "`gpu-node-07`" in rendered
    assert "train-llm-master-0`" not in rendered.split("path:")[1].split("\\n")[0]


@pytest.mark.parametrize("bot_on_scenario", ["vllm-crashloop"], indirect=True)
def test_a_kind_the_bot_does_not_triage_is_refused_with_every_form(bot_on_scenario) -> None:
    bot, _lab = bot_on_scenario
    response = bot.command("job service/serving/vllm-llama")
    assert "deployment (deploy)" in response.text and "plural.group/namespace/name" in response.text
    assert bot.services.incidents.list_open() == []
