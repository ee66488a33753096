"""Kubernetes misbehaving during `/triage job`: the snapshot returns within its deadline, says what it
could not check, the incident is kept, and collected evidence is redacted on its way to Slack and the
database. The lab API server speaks the wire format; the real `kubernetes` client talks to it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from bot.config import Settings
from bot.diagnosis.service import ClusterUnreachable, diagnose
from bot.evidence.findings import CollectorOutcome
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from tests.hardening.conftest import FaultySlackApi, running_bot
from tests.hardening.tcp_proxy import TcpProxy
from tests.support.kube_lab import Lab, running_lab
from tests.support.slack import BotUnderTest

DEADLINE_S = 3.0
HF_TOKEN = "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"
DB_URL_PASSWORD = "Tr1ag3-pw-in-url"


def _lab_diagnoser(lab: Lab, **bounds: Any) -> Any:
    def run(*, target: Target, settings: Settings) -> SnapshotReport:
        del settings
        return diagnose(target=target, settings=lab.settings(**bounds))

    return run


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """The crash-looping trainer, whose previous log also leaks a token and a database password."""
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as running:
        state = running.server.state
        key = next(k for k in state.logs if k[0] == "ml" and k[1].startswith("train-llm-0") and k[3])
        state.logs[key] = state.logs[key] + (  # at the end, inside the tail the collector reads
            f"retry: login with HF_TOKEN={HF_TOKEN}\n"
            f"retry: connecting to postgresql://trainer:{DB_URL_PASSWORD}@db.ml:5432/runs\n"
        )
        yield running


@pytest.fixture
def bot_on_lab(slack_stand_in: FaultySlackApi, lab: Lab, tmp_path: Path) -> Iterator[BotUnderTest]:
    diagnoser = _lab_diagnoser(lab, deadline_seconds=DEADLINE_S, call_timeout_seconds=1.0)
    with running_bot(
        database_url=f"sqlite:///{tmp_path / 'kube.db'}", slack=slack_stand_in, diagnoser=diagnoser
    ) as bot:
        slack_stand_in.clear()
        yield bot


def _posted(bot: BotUnderTest) -> str:
    return json.dumps([call.params for call in bot.slack.calls])


def test_collected_secrets_never_reach_slack_or_the_database(bot_on_lab: BotUnderTest) -> None:
    bot_on_lab.command("job ml/train-llm")
    (stored,) = bot_on_lab.services.incidents.snapshots(incident_key="INC-0001")
    everything = json.dumps(stored) + _posted(bot_on_lab)
    assert "train-llm" in everything and "ModuleNotFoundError" in json.dumps(stored)
    assert "HF_TOKEN=[REDACTED]" in everything  # the leaky lines were collected, then scrubbed
    assert HF_TOKEN not in everything
    assert DB_URL_PASSWORD not in everything


def test_api_errors_and_slowness_during_triage_are_reported_and_the_incident_kept(
    bot_on_lab: BotUnderTest, lab: Lab
) -> None:
    lab.server.inject(path_pattern=r"/events", status=500)
    lab.server.inject(path_pattern=r"/nodes/", latency_seconds=2.0)  # past the 1 s per-call timeout
    lab.server.inject(path_pattern=r"/apis/kubeflow\.org/", status=404)
    bot_on_lab.command("job ml/train-llm")
    (stored,) = bot_on_lab.services.incidents.snapshots(incident_key="INC-0001")
    outcomes = {item["name"]: item["outcome"] for item in stored["collectors"]}
    assert outcomes["events"] == CollectorOutcome.ERROR.value
    assert outcomes["nodes"] == CollectorOutcome.TIMEOUT.value
    assert outcomes["pods"] == CollectorOutcome.OK.value
    assert stored["elapsed_ms"] <= DEADLINE_S * 1000 + 1500  # the deadline bounds the whole snapshot
    posted = _posted(bot_on_lab)
    assert "not checked" in posted.lower() and "events" in posted and "nodes" in posted
    # The workload's own log may quote its Python traceback as evidence; the bot's code must never show.
    assert re.search(r'File \\"[^"]*/(bot|handlers|storage)/', posted) is None
    assert bot_on_lab.services.incidents.get(incident_key="INC-0001").is_open


def test_rbac_denial_on_pods_is_reported_as_a_finding_not_a_failure(
    bot_on_lab: BotUnderTest, lab: Lab
) -> None:
    lab.server.inject(path_pattern=r"/api/v1/namespaces/ml/pods", status=403)
    bot_on_lab.command("job ml/train-llm")
    (stored,) = bot_on_lab.services.incidents.snapshots(incident_key="INC-0001")
    assert {item["name"]: item["outcome"] for item in stored["collectors"]}["pods"] == "forbidden"
    assert "snapshot.forbidden" in [item["rule"] for item in stored["findings"]]
    assert "snapshot.forbidden" in _posted(bot_on_lab)


def test_a_cluster_that_refuses_connections_fails_the_snapshot_but_keeps_the_incident(
    slack_stand_in: FaultySlackApi, tmp_path: Path
) -> None:
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        diagnoser = _lab_diagnoser(lab, deadline_seconds=DEADLINE_S, call_timeout_seconds=1.0)
    # The lab server is stopped: its port now refuses connections.
    with running_bot(
        database_url=f"sqlite:///{tmp_path / 'refused.db'}", slack=slack_stand_in, diagnoser=diagnoser
    ) as bot:
        slack_stand_in.clear()
        started = time.monotonic()
        bot.command("job ml/train-llm")
        assert time.monotonic() - started < DEADLINE_S + 10
        texts = [str(call.params.get("text", "")) for call in slack_stand_in.calls_to("chat.postMessage")]
        # The user reads why (the API server refused the connection), not an exception's class name.
        assert any("No snapshot was taken" in text and "refused" in text.lower() for text in texts)
        assert bot.services.incidents.get(incident_key="INC-0001").is_open
        assert bot.services.incidents.timeline("INC-0001")[-1].kind == "snapshot_failed"


@pytest.mark.parametrize("cut_after", [300, 1_500, 4_000, 6_000])
def test_truncated_api_responses_end_in_a_bounded_report_or_a_clear_unreachable(
    tmp_path: Path, cut_after: int
) -> None:
    with running_lab(tmp_path=tmp_path, scenario="crashloop") as lab:
        upstream = make_url(lab.server.url.replace("http://", "postgresql://"))
        proxy = TcpProxy(
            upstream_host=upstream.host or "127.0.0.1",
            upstream_port=upstream.port or 80,
            truncate_after=cut_after,
        )
        try:
            kubeconfig = json.loads(lab.server.kubeconfig_text())
            kubeconfig["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{proxy.port}"
            path = tmp_path / f"kubeconfig-truncated-{cut_after}"
            path.write_text(json.dumps(kubeconfig), encoding="utf-8")
            truncated = Lab(server=lab.server, kubeconfig=path, scenario=lab.scenario)
            started = time.monotonic()
            try:
                report = diagnose(
                    target="ml/train-llm",
                    settings=truncated.settings(deadline_seconds=DEADLINE_S, call_timeout_seconds=1.0),
                )
            except ClusterUnreachable as error:
                assert str(error)  # says why; no other exception type escapes
                report = None
            assert time.monotonic() - started < DEADLINE_S + 5
            if report is not None:
                failed = {CollectorOutcome.ERROR, CollectorOutcome.PARTIAL, CollectorOutcome.TIMEOUT}
                cut_short = [item.name for item in report.collectors if item.outcome in failed]
                assert cut_short  # the truncated answer shows as a failed collector...
                assert all(any(line.startswith(name) for line in report.not_checked) for name in cut_short)
        finally:
            proxy.close()


def test_a_whole_triage_only_ever_reads_from_the_cluster(bot_on_lab: BotUnderTest, lab: Lab) -> None:
    lab.server.reset_log()
    bot_on_lab.command("job ml/train-llm")
    methods = {record.method for record in lab.server.requests}
    assert lab.server.requests, "the snapshot made no API calls"
    assert methods == {"GET"}
