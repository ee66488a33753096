"""One bot, several clusters, through the real server over signed HTTP: two lab Kubernetes API servers at once
(the same job name on both), the real one-host Slurm cluster under two names (CLI with `-M`, and slurmrestd),
and a cluster that refuses connections or answers slowly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from typer.testing import CliRunner

from bot.diagnosis.service import diagnose
from bot.lab.kube_api import KubeApiServer
from handlers.main import typer_app
from tests.support.clusters import clusters_document, kubernetes_entry, lab_clusters, refusing_kubeconfig
from tests.support.slack import BotUnderTest, lab_settings, make_bot, serving, slash_body

SLURM_CLUSTER = "triage-test"  # ClusterName of .ci/setup.d/30-slurm.sh
RESTD_URL = os.environ.get("TRIAGE_TEST_SLURMRESTD_URL", "http://127.0.0.1:6820")
BOUNDS = {"deadline_seconds": 6, "call_timeout_seconds": 3}


@pytest.fixture
def labs(tmp_path: Path) -> Iterator[dict[str, KubeApiServer]]:
    """prod-east runs the OOM scenario, prod-west the NCCL/IB one: both have `ml/train-llm`."""
    with lab_clusters(tmp_path=tmp_path, scenarios_by_name={"prod-east": "oom", "prod-west": "nccl-ib"}) as servers:
        yield servers


def _bot(tmp_path: Path, slack: Any, *entries: dict[str, Any]) -> Any:
    database_url = f"sqlite:///{tmp_path / 'clusters.db'}"
    settings = lab_settings(database_url=database_url, slack=slack, clusters_inline=clusters_document(*entries))
    return make_bot(database_url=database_url, slack=slack, diagnoser=diagnose, settings=settings)


@pytest.fixture
def bot(labs: dict[str, KubeApiServer], slack_stand_in: Any, tmp_path: Path) -> Iterator[BotUnderTest]:
    """Two lab Kubernetes clusters and the real Slurm cluster (as `slurm-a`, read with `-M`)."""
    built = _bot(tmp_path, slack_stand_in,
                 kubernetes_entry(name="prod-east", tmp_path=tmp_path, bounds=BOUNDS),
                 kubernetes_entry(name="prod-west", tmp_path=tmp_path, bounds=BOUNDS),
                 {"name": "slurm-a", "slurm": {"backend": "cli", "cluster": SLURM_CLUSTER}})
    with serving(built, slack=slack_stand_in) as running:
        yield running


def _ephemerals(bot: BotUnderTest) -> list[str]:
    return [call.params["text"] for call in bot.slack.calls_to("chat.postEphemeral")]


def _posts(bot: BotUnderTest) -> list[dict[str, Any]]:
    return [call.params for call in bot.slack.calls_to("chat.postMessage")]


def _asked(server: KubeApiServer, path: str) -> bool:
    return any(record.path == path for record in server.requests)


JOB_PATH = "/apis/batch/v1/namespaces/ml/jobs/train-llm"


def test_the_same_job_name_in_two_clusters_stays_two_incidents(
    bot: BotUnderTest, labs: dict[str, KubeApiServer]
) -> None:
    bot.command("job prod-east:ml/train-llm")
    assert _asked(labs["prod-east"], JOB_PATH) and not _asked(labs["prod-west"], JOB_PATH)
    bot.command("job prod-west:ml/train-llm")
    assert _asked(labs["prod-west"], JOB_PATH)
    bot.slack.clear()
    bot.command("job prod-east:ml/train-llm")  # the same workload on the same cluster: pointed at its incident
    assert any("INC-0001 is already open for `prod-east:ml/train-llm`" in text for text in _ephemerals(bot))
    incidents = {item.key: item for item in bot.services.incidents.list_open()}
    assert sorted(incidents) == ["INC-0001", "INC-0002"]
    assert (incidents["INC-0001"].cluster, incidents["INC-0001"].target) == ("prod-east", "prod-east:ml/train-llm")
    assert (incidents["INC-0002"].cluster, incidents["INC-0002"].target) == ("prod-west", "prod-west:ml/train-llm")
    # Each cluster's own evidence: the OOM kill on east, the NCCL/IB errors on west.
    assert (incidents["INC-0001"].verdict_layer, incidents["INC-0002"].verdict_layer) == ("runtime", "fabric")
    (east,) = bot.services.incidents.snapshots(incident_key="INC-0001")
    (west,) = bot.services.incidents.snapshots(incident_key="INC-0002")
    assert (east["cluster"], west["cluster"]) == ("prod-east", "prod-west")
    assert "OOMKilled" in json.dumps(east) and "OOMKilled" not in json.dumps(west)


def test_an_id_that_could_be_on_either_cluster_is_refused_listing_them_until_the_channel_sets_a_default(
    bot: BotUnderTest, labs: dict[str, KubeApiServer]
) -> None:
    bot.command("job ml/train-llm")
    (refusal,) = _ephemerals(bot)
    assert "could be on any of 2 Kubernetes clusters: prod-east, prod-west" in refusal
    assert "`prod-east:ml/train-llm`" in refusal and "/triage config cluster" in refusal
    assert bot.services.incidents.list_open() == [] and not _asked(labs["prod-east"], JOB_PATH)
    bot.command("config cluster prod-west")
    announced = [post["text"] for post in _posts(bot) if not post.get("thread_ts")]
    assert any("set this channel's default cluster to *prod-west* (was none)" in text for text in announced)
    bot.command("job ml/train-llm")
    (incident,) = bot.services.incidents.list_open()
    assert (incident.cluster, incident.target) == ("prod-west", "prod-west:ml/train-llm")
    bot.slack.clear()
    bot.command("job prod-west:ml/train-llm")  # named or by the channel default: the same incident
    assert any("INC-0001 is already open" in text for text in _ephemerals(bot))
    bot.command("job 88123", channel_id="C0OTHER")  # one Slurm cluster: a bare job id needs no cluster
    assert not any("could be on any" in text for text in _ephemerals(bot))


def test_compare_takes_the_healthy_sibling_from_the_incidents_cluster_or_the_one_named(
    bot: BotUnderTest, labs: dict[str, KubeApiServer]
) -> None:
    bot.command("job prod-east:ml/train-llm")
    labs["prod-west"].reset_log()
    bot.command("compare INC-0001 ml/train-llm-ok")  # no cluster named: the incident's own (prod-east)
    assert not labs["prod-west"].requests
    bot.command("compare INC-0001 prod-west:ml/train-llm")  # the same job name on the other cluster is a sibling
    assert _asked(labs["prod-west"], JOB_PATH)
    entries = [item for item in bot.services.incidents.timeline("INC-0001") if item.kind == "comparison"]
    assert [(item.data["healthy"], item.data["healthy_cluster"]) for item in entries] == [
        ("prod-east:ml/train-llm-ok", "prod-east"), ("prod-west:ml/train-llm", "prod-west")]
    bot.slack.clear()
    bot.command("compare INC-0001 ml/train-llm")  # the incident's own workload on its own cluster
    assert any("this incident's own workload" in text for text in _ephemerals(bot))


def test_records_and_exports_carry_the_cluster(bot: BotUnderTest, tmp_path: Path) -> None:
    from bot.records import build as records

    bot.command("job prod-west:ml/train-llm")
    data = bot.services.core.incident_data(incident_key="INC-0001")
    handoff = records.build_handoff(data=data)
    assert data.cluster == "prod-west" and handoff.to_dict()["cluster"] == "prod-west"
    assert "- Cluster: `prod-west`" in records.render_handoff(record=handoff)
    assert "- Cluster: `prod-west`" in records.render_postmortem(record=records.build_postmortem(data=data))
    bundle_path = tmp_path / "inc.tar.gz"
    result = CliRunner().invoke(typer_app(), ["export", "INC-0001", "--format", "json", "--record", "handoff",
                                              "--bundle", str(bundle_path), "--database-url",
                                              str(bot.services.core.engine.url)])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["cluster"] == "prod-west"
    with tarfile.open(bundle_path) as archive:
        manifest = next(member for member in archive.getmembers() if member.name.endswith("manifest.json"))
        assert json.loads(archive.extractfile(manifest).read())["cluster"] == "prod-west"  # type: ignore[union-attr]


def test_node_probes_run_only_on_clusters_whose_entry_allows_them(bot: BotUnderTest) -> None:
    bot.command("job prod-west:ml/train-llm")
    bot.services.core.settings = bot.services.settings.model_copy(update={"node_probe_runner": "srun"})
    bot.slack.clear()
    bot.command("fabric INC-0001 probe")
    texts = [post["text"] for post in _posts(bot)]
    assert any("No probe ran: cluster prod-west does not allow node probes" in text for text in texts), texts
    assert not any(text.startswith("Probe (`ibstat`") for text in texts)


def test_a_cluster_that_refuses_connections_is_reported_without_blocking_the_other(
    labs: dict[str, KubeApiServer], slack_stand_in: Any, tmp_path: Path
) -> None:
    refusing_kubeconfig(tmp_path=tmp_path, name="gone")
    built = _bot(tmp_path, slack_stand_in, kubernetes_entry(name="prod-east", tmp_path=tmp_path, bounds=BOUNDS),
                 kubernetes_entry(name="gone", tmp_path=tmp_path, bounds=BOUNDS))
    with serving(built, slack=slack_stand_in) as bot:
        sent = [threading.Thread(target=bot.post, args=(slash_body(text=text, channel_id=channel),))
                for text, channel in (("job gone:ml/train-llm", "C0GONE"), ("job prod-east:ml/train-llm", "C0EAST"))]
        for thread in sent:
            thread.start()
        for thread in sent:
            thread.join(10)
        assert bot.services.work.wait_idle(timeout=30)
        by_cluster = {item.cluster: item for item in bot.services.incidents.list_open()}
        assert sorted(by_cluster) == ["gone", "prod-east"]  # both incidents are kept
        assert by_cluster["prod-east"].verdict_layer == "runtime"
        gone_thread = [post["text"] for post in _posts(bot) if post.get("channel") == "C0GONE"]
        assert any(re.search(r"No snapshot was taken: cluster gone: .*[Cc]onnection refused", text)
                   for text in gone_thread), gone_thread
        ready = requests.get(f"{bot.server.url}/readyz", timeout=15)
        body = ready.json()
        assert ready.status_code == 200 and body["ready"] is True
        assert body["clusters"]["prod-east"] == "ok" and "refused" in body["clusters"]["gone"]
        metrics = requests.get(f"{bot.server.url}/metrics", timeout=10).text
        assert 'triage_cluster_snapshots_total{cluster="gone",outcome="unreachable"} 1.0' in metrics
        assert 'triage_cluster_snapshots_total{cluster="prod-east",outcome="ok"} 1.0' in metrics
        assert 'triage_cluster_up{cluster="gone"} 0.0' in metrics
        assert 'triage_cluster_up{cluster="prod-east"} 1.0' in metrics


def test_a_slow_cluster_fills_only_its_own_slots_and_the_other_cluster_answers_meanwhile(
    labs: dict[str, KubeApiServer], slack_stand_in: Any, tmp_path: Path
) -> None:
    slow = {"deadline_seconds": 8, "call_timeout_seconds": 6}
    built = _bot(tmp_path, slack_stand_in, kubernetes_entry(name="prod-east", tmp_path=tmp_path, bounds=BOUNDS),
                 kubernetes_entry(name="prod-west", tmp_path=tmp_path, bounds=slow, max_snapshots=1))
    labs["prod-west"].inject(path_pattern=r"^/api", latency_seconds=4.0)  # every read on west takes 4 s
    with serving(built, slack=slack_stand_in) as bot:
        gate = bot.services.core.clusters.gate("prod-west")
        for index, name in enumerate(("train-llm", "train-llm-ok", "other")):  # 1 runs, 1 waits, 1 is refused
            bot.post(slash_body(text=f"job prod-west:ml/{name}", channel_id=f"C0W{index}"))
            assert _eventually(lambda index=index: gate.running + gate.waiting >= min(index + 1, 2))
        bot.post(slash_body(text="job prod-east:ml/train-llm", channel_id="C0EAST"))
        assert bot.slack.wait_for(lambda calls: any(
            call.method == "chat.postMessage" and call.params.get("channel") == "C0EAST"
            and "OOMKilled" in json.dumps(call.params) for call in calls), timeout=20)
        assert gate.running == 1  # east's findings are posted while west's first snapshot still runs
        assert bot.services.work.wait_idle(timeout=60)
        texts = [post["text"] for post in _posts(bot)]
        assert any("cluster prod-west already has 1 snapshots running and 1 waiting" in text for text in texts)
        metrics = requests.get(f"{bot.server.url}/metrics", timeout=10).text
        assert 'triage_cluster_snapshots_busy_total{cluster="prod-west"} 1.0' in metrics
        assert 'triage_cluster_snapshots_busy_total{cluster="prod-east"} 0.0' in metrics


def _eventually(condition: Any, *, limit: float = 15.0) -> bool:
    """Poll a condition on the bot's own state (bounded); never a timing assertion."""
    stop = time.monotonic() + limit
    while not condition():
        if time.monotonic() > stop:
            return False
        time.sleep(0.02)
    return True


# --- the real Slurm cluster, under two names ------------------------------------------------------------------

slurm_only = pytest.mark.skipif(shutil.which("sbatch") is None or not os.environ.get("TRIAGE_TEST_SLURM"),
                                reason="needs the one-host Slurm cluster (.ci/setup.d/30-slurm.sh, TRIAGE_TEST_SLURM=1)")


@pytest.fixture
def pending_job(tmp_path: Path) -> Iterator[str]:
    """A job that stays pending on the DOWN partition `maint` (PartitionDown), cancelled afterwards."""
    done = subprocess.run(["sbatch", "--parsable", "-p", "maint", "-J", "triage-clusters", "-o", "/dev/null",
                           "-e", "/dev/null", f"--chdir={tmp_path}", "--wrap", "sleep 60"],
                          capture_output=True, text=True, timeout=15, check=True)
    job_id = done.stdout.strip().split(";")[0]
    yield job_id
    subprocess.run(["scancel", job_id], capture_output=True, timeout=15, check=False)


@pytest.fixture
def slurm_token(tmp_path: Path) -> Path:
    """A short-lived JWT from the controller, as a mounted Secret file."""
    done = subprocess.run(["scontrol", "token", "lifespan=900"], capture_output=True, text=True, timeout=15,
                          check=False)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "slurm-token"
    path.write_text(done.stdout.strip().removeprefix("SLURM_JWT="), encoding="utf-8")
    return path


@slurm_only
def test_a_real_slurm_job_is_triaged_on_each_named_slurm_cluster_as_its_own_incident(
    labs: dict[str, KubeApiServer], slack_stand_in: Any, tmp_path: Path, pending_job: str, slurm_token: Path
) -> None:
    built = _bot(tmp_path, slack_stand_in,
                 kubernetes_entry(name="prod-east", tmp_path=tmp_path, bounds=BOUNDS),
                 kubernetes_entry(name="prod-west", tmp_path=tmp_path, bounds=BOUNDS),
                 {"name": "slurm-a", "slurm": {"backend": "cli", "cluster": SLURM_CLUSTER}},
                 {"name": "slurm-rest", "slurm": {"backend": "rest", "url": RESTD_URL, "token_file": str(slurm_token),
                                                  "user": "root"}})
    with serving(built, slack=slack_stand_in) as bot:
        bot.command(f"job {pending_job}")
        assert any("could be on any of 2 Slurm clusters: slurm-a, slurm-rest" in text for text in _ephemerals(bot))
        bot.command(f"job slurm-a:{pending_job}")
        bot.command(f"job slurm-rest:{pending_job}")
        bot.command("job prod-east:ml/train-llm")
        incidents = {item.cluster: item for item in bot.services.incidents.list_open()}
        assert sorted(incidents) == ["prod-east", "slurm-a", "slurm-rest"]
        for name in ("slurm-a", "slurm-rest"):
            (stored,) = bot.services.incidents.snapshots(incident_key=incidents[name].key)
            assert stored["cluster"] == name and stored["target"] == f"{name}:{pending_job}"
            assert "PartitionDown" in json.dumps(stored)  # the scheduler's own reason, read on that cluster
        (cli_snapshot,) = bot.services.incidents.snapshots(incident_key=incidents["slurm-a"].key)
        commands = {evidence["command"] for finding in cli_snapshot["findings"] for evidence in finding["evidence"]}
        assert any(command.startswith(f"scontrol -M {SLURM_CLUSTER} ") for command in commands), commands
