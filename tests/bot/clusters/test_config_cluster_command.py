"""`/triage config cluster <name>` over signed HTTP through the one app builder: the channel's default cluster
is stored (another replica and a restart agree), refused for unknown names and for users off the snapshot
allow-list, shown and cleared."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from bot.lab.demo import minimal_diagnoser
from tests.support.clusters import clusters_document
from tests.support.slack import lab_settings, make_bot, serving

DOCUMENT = clusters_document(
    {"name": "prod-east", "kubernetes": {"kubeconfig": "/etc/triage/east"}},
    {"name": "prod-west", "kubernetes": {"kubeconfig": "/etc/triage/west"}},
    {"name": "slurm-a", "slurm": {"cluster": "a"}},
)


def _bot(tmp_path: Path, slack: Any, **overrides: Any) -> Any:
    database_url = f"sqlite:///{tmp_path / 'config.db'}"
    settings = lab_settings(database_url=database_url, slack=slack, clusters_inline=DOCUMENT, **overrides)
    return make_bot(database_url=database_url, slack=slack, diagnoser=minimal_diagnoser, settings=settings)


def _ephemeral(bot: Any) -> str:
    return "\n".join(call.params["text"] for call in bot.slack.calls_to("chat.postEphemeral"))


def test_config_cluster_sets_the_channel_default_and_announces_it_in_the_channel(
    tmp_path: Path, slack_stand_in: Any
) -> None:
    with serving(_bot(tmp_path, slack_stand_in), slack=slack_stand_in) as bot:
        response = bot.command("config cluster prod-east")
        assert response.status_code == 200
        (announced,) = bot.slack.calls_to("chat.postMessage")
        assert announced.params["channel"] == "C0INC" and "thread_ts" not in announced.params
        assert "<@U0ALICE> set this channel's default cluster to *prod-east* (was none)" in announced.params["text"]
        assert bot.services.incidents.channel_cluster(channel_id="C0INC") == "prod-east"
        assert bot.services.incidents.channel_cluster(channel_id="C0OTHER") is None
        bot.command("config cluster")
        shown = _ephemeral(bot)
        assert "This channel's default cluster: *prod-east*" in shown
        assert "`prod-west` (Kubernetes)" in shown and "`slurm-a` (Slurm)" in shown
    with serving(_bot(tmp_path, slack_stand_in), slack=slack_stand_in) as restarted:  # stored, not remembered
        assert restarted.services.incidents.channel_cluster(channel_id="C0INC") == "prod-east"
        restarted.command("config cluster none")
        assert "cleared this channel's default cluster (was prod-east)" in restarted.slack.calls_to(
            "chat.postMessage")[-1].params["text"]
        assert restarted.services.incidents.channel_cluster(channel_id="C0INC") is None


def test_an_unknown_cluster_is_refused_listing_the_configured_ones_and_nothing_is_stored(
    tmp_path: Path, slack_stand_in: Any
) -> None:
    with serving(_bot(tmp_path, slack_stand_in), slack=slack_stand_in) as bot:
        bot.command("config cluster prod-north")
        refusal = _ephemeral(bot)
        assert "There is no cluster `prod-north`" in refusal and "prod-east (Kubernetes)" in refusal
        assert bot.services.incidents.channel_cluster(channel_id="C0INC") is None
        assert bot.slack.calls_to("chat.postMessage") == []


def test_malformed_config_commands_are_refused_in_the_ack_with_the_usage(tmp_path: Path, slack_stand_in: Any) -> None:
    with serving(_bot(tmp_path, slack_stand_in), slack=slack_stand_in) as bot:
        for text in ("config", "config colour blue", "config cluster Prod_East", "config cluster a b"):
            response = bot.command(text)
            assert "/triage config cluster <name>" in html.unescape(response.text), text  # as Slack shows the ack
        assert bot.services.incidents.channel_cluster(channel_id="C0INC") is None


def test_only_users_who_may_cause_cluster_reads_change_where_they_go(tmp_path: Path, slack_stand_in: Any) -> None:
    built = _bot(tmp_path, slack_stand_in, slack_snapshot_allowed_user_ids="U0ONCALL")
    with serving(built, slack=slack_stand_in) as bot:
        bot.command("config cluster prod-west", user_id="U0MALLORY")
        assert "snapshot allow-list" in _ephemeral(bot) and "set a channel's default cluster" in _ephemeral(bot)
        assert bot.services.incidents.channel_cluster(channel_id="C0INC") is None
        bot.command("config cluster prod-west", user_id="U0ONCALL")
        assert bot.services.incidents.channel_cluster(channel_id="C0INC") == "prod-west"
