"""Two replicas of the bot on one PostgreSQL database: the same Slack request handled once."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import SlackApiStandIn
from tests.support.slack import BotUnderTest, make_bot, serving, slash_body

pytestmark = pytest.mark.postgres


@pytest.fixture
def replicas(slack_stand_in: SlackApiStandIn, postgres_url: str) -> Iterator[list[BotUnderTest]]:
    with contextlib.ExitStack() as stack:
        started = [
            stack.enter_context(
                serving(
                    make_bot(database_url=postgres_url, slack=slack_stand_in, diagnoser=minimal_diagnoser),
                    slack=slack_stand_in,
                )
            )
            for _ in range(2)
        ]
        slack_stand_in.clear()
        yield started


def test_the_same_command_delivered_to_both_replicas_opens_one_incident_and_one_root(
    replicas: list[BotUnderTest], slack_stand_in: SlackApiStandIn
) -> None:
    body = slash_body(
        text="job ml/shared", trigger_id="42.42.same", response_url=slack_stand_in.response_url()
    )
    gate = threading.Barrier(len(replicas))
    statuses: list[int] = []

    def deliver(replica: BotUnderTest) -> None:
        gate.wait()
        statuses.append(replica.post(body).status_code)

    threads = [threading.Thread(target=deliver, args=(replica,)) for replica in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for replica in replicas:
        assert replica.services.work.wait_idle(timeout=30)
    assert statuses == [200, 200]
    roots = [call for call in slack_stand_in.calls_to("chat.postMessage") if "thread_ts" not in call.params]
    assert len(roots) == 1
    assert [view.key for view in replicas[0].services.incidents.list_open()] == ["INC-0001"]


def test_different_people_opening_the_same_job_on_two_replicas_get_one_incident(
    replicas: list[BotUnderTest], slack_stand_in: SlackApiStandIn
) -> None:
    first, second = replicas
    first.command("job ml/shared", user_id="U0ALICE")
    second.command("job job/ml/shared", user_id="U0BOB")
    assert len(first.services.incidents.list_open()) == 1
    (ephemeral,) = slack_stand_in.calls_to("chat.postEphemeral")
    assert ephemeral.params["user"] == "U0BOB" and "already open" in ephemeral.params["text"]
