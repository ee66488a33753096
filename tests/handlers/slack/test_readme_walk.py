"""The README walk: every row of the README's Slack tables, typed as written into the bot from the one builder,
over signed HTTP and over Socket Mode, with the outcome the row promises checked where a person would see it
(what reached the Slack Web API stand-in) and where the record lives (the database).

Rows are keyed by their first cell. A README row without a walk fails (write one), and so does a walk whose
row is gone (rename or delete it): the table and the tests cannot drift apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import os
import re
import shutil
import time
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from bot.config import Settings
from bot.diagnosis.collectors import node_probe
from bot.diagnosis.service import diagnose
from bot.evidence.findings import utcnow
from bot.evidence.report import SnapshotReport
from bot.evidence.targets import Target
from bot.lab.demo import minimal_diagnoser
from bot.lab.slack_api import BOT_TOKEN, RecordedCall, SlackApiStandIn
from handlers.slack.blocks import changes as change_blocks
from handlers.slack.blocks import findings as findings_blocks
from handlers.slack.commands.incident import POSTMORTEM_ACTION
from handlers.slack.services import Services
from storage import db
from tests.bot.records.conftest import FakeClock
from tests.support.kube_lab import Lab, running_lab
from tests.support.paths import ROOT
from tests.support.slack import SIGNING_SECRET, BotUnderTest, lab_settings, make_bot, serving, slash_fields
from tests.support.socket_mode import SocketBotUnderTest, socket_serving

README = ROOT / "README.md"
SECTIONS = ("## In Slack: one command", "### Changes, records and reminders")
CHANNEL = "C0INC"
ALICE, BOB, CAROL, DAVE, ERIN, ADMIN = "U0ALICE", "U0BOB", "U0CAROL", "U0DAVE", "U0ERIN", "U0ADMIN"
FAILING, HEALTHY = "ml/train-llm", "ml/train-llm-ok"  # the lab's nccl-ib scenario
IBSTAT = ROOT / "tests" / "fixtures" / "fabric" / "published" / "ibstat-mooncake-1999.txt"


# --- the README's rows -----------------------------------------------------------------------------


def readme_rows(text: str) -> dict[str, str]:
    """First cell -> second cell of every row in the tables under SECTIONS (escaped `\\|` kept as `|`)."""
    rows: dict[str, str] = {}
    for heading in SECTIONS:
        assert heading in text, f"README lost its section {heading!r}"
        lines = text.split(heading, 1)[1].lstrip("\n").splitlines()
        table = []
        for line in lines:
            if line.startswith("|"):
                table.append(line)
            elif table or line.startswith("#"):
                break
        assert len(table) > 2, f"no table under {heading!r}"
        for line in table[2:]:  # after the header and the |---| line
            cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            rows[cells[0]] = cells[1]
    return rows


ROWS = readme_rows(README.read_text(encoding="utf-8"))


# --- one way to type into Slack, over either transport --------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reply:
    """What Slack shows the person at once: the ack's text or its response payload (a modal's errors)."""

    payload: dict[str, Any]

    @property
    def text(self) -> str:
        return str(self.payload.get("text", ""))


@dataclasses.dataclass(kw_only=True)
class Walker:
    """A person in the channel, typing commands and clicking buttons; and what they (and the record) see."""

    transport: str
    running: BotUnderTest | SocketBotUnderTest
    clock: FakeClock
    lab: Lab
    monkeypatch: pytest.MonkeyPatch
    tmp_path: Path

    @property
    def slack(self) -> SlackApiStandIn:
        return self.running.slack

    @property
    def services(self) -> Services:
        return self.running.services

    def command(self, text: str, *, user: str = ALICE, trigger_id: str | None = None) -> Reply:
        """`/triage <text>` from `user` in the channel; returns the ack once the work it started is done."""
        fields = slash_fields(
            text=text, user_id=user, channel_id=CHANNEL, trigger_id=trigger_id, response_url=self.slack.response_url()
        )
        if isinstance(self.running, SocketBotUnderTest):
            ack = self.running.socket.wait_for_ack(self.running.socket.slash_command(fields))
            assert ack.in_time and self.running.socket.protocol_errors == []
            reply = Reply(payload=ack.payload or {})
        else:
            reply = _http_reply(self.running.post(urllib.parse.urlencode(fields)))
        assert self.services.work.wait_idle(timeout=30), "lazy work did not finish"
        return reply

    def interact(self, payload: dict[str, Any]) -> Reply:
        """A block_actions click or a view_submission, as Slack wraps it for the transport."""
        payload = {"team": {"id": "T0LAB"}, "api_app_id": "A0TRIAGE", "trigger_id": f"{time.time_ns()}.lab", **payload}
        if isinstance(self.running, SocketBotUnderTest):
            ack = self.running.socket.wait_for_ack(self.running.socket.interactive(payload))
            assert ack.in_time and self.running.socket.protocol_errors == []
            reply = Reply(payload=ack.payload or {})
        else:
            reply = _http_reply(self.running.post(urllib.parse.urlencode({"payload": json.dumps(payload)})))
        assert self.services.work.wait_idle(timeout=30), "lazy work did not finish"
        return reply

    def click(self, *, action_id: str, value: str, user: str = ALICE, message_ts: str = "") -> Reply:
        """A button on a message in the channel."""
        return self.interact(
            {
                "type": "block_actions",
                "user": {"id": user},
                "channel": {"id": CHANNEL},
                "container": {"type": "message", "channel_id": CHANNEL, "message_ts": message_ts},
                "message": {"ts": message_ts, "text": ""} if message_ts else None,
                "actions": [
                    {
                        "type": "button",
                        "action_id": action_id,
                        "value": value,
                        "block_id": "b",
                        "action_ts": f"{time.time():.6f}",
                    }
                ],
            }
        )

    def submit(self, *, view: dict[str, Any], user: str, **answers: str) -> Reply:
        """Fill a modal's inputs with `answers` (selects keep their initial option) and submit it."""
        values: dict[str, Any] = {}
        for block in view["blocks"]:
            if block["type"] != "input":
                continue
            element = block["element"]
            if element["type"] == "plain_text_input":
                value: dict[str, Any] = {"type": "plain_text_input", "value": answers.get(block["block_id"], "")}
            elif element["type"] == "static_select":
                value = {"type": "static_select", "selected_option": element.get("initial_option")}
            else:
                value = {"type": element["type"], "selected_user": answers.get(block["block_id"])}
            values[block["block_id"]] = {"value": value}
        submitted = {**view, "id": "V0FORM", "state": {"values": values}}
        return self.interact({"type": "view_submission", "user": {"id": user}, "view": submitted})

    # --- what people see -------------------------------------------------------------------------

    def posts(self, *, channel: str = CHANNEL) -> list[dict[str, Any]]:
        return [call.params for call in self.slack.calls_to("chat.postMessage") if call.params["channel"] == channel]

    def roots(self) -> list[dict[str, Any]]:
        return [post for post in self.posts() if not post.get("thread_ts")]

    def thread(self, key: str) -> list[dict[str, Any]]:
        """Replies under the incident's root message."""
        root_ts = self.services.incidents.get(incident_key=key).thread_ts
        assert root_ts, f"{key} has no root message"
        return [post for post in self.posts() if post.get("thread_ts") == root_ts]

    def ephemerals(self, user: str) -> list[str]:
        return [
            _plain(call.params) for call in self.slack.calls_to("chat.postEphemeral") if call.params["user"] == user
        ]

    def dms(self, user: str) -> list[str]:
        return [str(post["text"]) for post in self.posts(channel=user)]

    def uploaded(self, *, title: str) -> list[bytes]:
        """Contents of every file uploaded with this title, oldest first."""
        found = []
        for call in self.slack.calls_to("files.completeUploadExternal"):
            files = call.params["files"] if isinstance(call.params["files"], list) else json.loads(call.params["files"])
            found += [self.slack.uploads[item["id"]] for item in files if item.get("title") == title]
        return found

    def last(self, method: str) -> RecordedCall:
        calls = self.slack.calls_to(method)
        assert calls, f"no {method} call"
        return calls[-1]

    def open_incident(self, target: str = FAILING, *, user: str = ALICE) -> str:
        """`/triage job <target>`; the new incident's key."""
        before = {item.key for item in self.services.incidents.list_open()}
        self.command(f"job {target}", user=user)
        (key,) = {item.key for item in self.services.incidents.list_open()} - before
        return key


def _http_reply(response: requests.Response) -> Reply:
    assert response.status_code == 200, response.text
    if not response.content:
        return Reply(payload={})
    if response.headers.get("Content-Type", "").startswith("application/json"):
        return Reply(payload=response.json())
    return Reply(payload={"text": response.text})


def _plain(params: dict[str, Any]) -> str:
    """A message's text and block text, unescaped, as one string to search."""
    return html.unescape(str(params.get("text", "")) + "\n" + json.dumps(params.get("blocks") or [], ensure_ascii=False))


def _view(call: RecordedCall) -> dict[str, Any]:
    view = call.params["view"]
    return view if isinstance(view, dict) else json.loads(view)


# --- the walks, one per README row -----------------------------------------------------------------

Walk = Callable[[Walker], None]
WALKS: dict[str, Walk] = {}
NEEDS_CLUSTER: set[str] = set()


def walk(row: str, *, cluster: bool = False) -> Callable[[Walk], Walk]:
    """Register the walk of the README row whose first cell is `row`; `cluster`: snapshots read the lab cluster."""

    def register(function: Walk) -> Walk:
        assert row not in WALKS, f"two walks for {row}"
        WALKS[row] = function
        if cluster:
            NEEDS_CLUSTER.add(row)
        return function

    return register


@walk("`/triage job <id>`", cluster=True)
def walk_job(w: Walker) -> None:
    reply = w.command(f"job {FAILING}")
    assert "Opening an incident and taking a bounded snapshot" in reply.text
    (incident,) = w.services.incidents.list_open()
    assert (incident.key, incident.target, incident.holders("commander")) == ("INC-0001", FAILING, (ALICE,))
    (root,) = w.roots()
    assert root["text"].startswith("INC-0001")
    thread = w.thread("INC-0001")
    assert any("commander until reassigned" in post["text"] for post in thread)
    (findings,) = [post for post in thread if post["text"].startswith("Verdict:")]
    assert "fabric" in findings["text"] and "NCCL WARN NET/IB" in _plain(findings)  # evidence, from the cluster
    (snapshot,) = w.services.incidents.snapshots(incident_key="INC-0001")
    assert snapshot["verdict"]["layer"] == "fabric" and snapshot["findings"]
    assert snapshot["collectors"] and "not_checked" in snapshot  # a bounded report says what it did not check

    # Never two: the same workload by another id form links the open incident.
    w.command(f"job pytorchjob/{FAILING}", user=BOB)
    assert [item.key for item in w.services.incidents.list_open()] == ["INC-0001"] and len(w.roots()) == 1
    assert any("INC-0001 is already open" in text for text in w.ephemerals(BOB))

    # Every id form the row lists is accepted.
    for target in ("job/ml/batch-eval", "jobset/ml/sweep", "aiperfjob/perf/bench-llm", "88123"):
        assert "Opening an incident" in w.command(f"job {target}").text, target
    targets = {item.target for item in w.services.incidents.list_open()}
    assert {"job/ml/batch-eval", "jobset/ml/sweep", "aiperfjob/perf/bench-llm", "slurm:88123"} <= targets


@walk("`/triage status [INC-n] <investigating|identified|mitigated|monitoring|resolved>`")
def walk_status(w: Walker) -> None:
    key = w.open_incident()
    root_ts = w.services.incidents.get(incident_key=key).thread_ts
    for text, status in (("status identified", "identified"), (f"status {key} mitigated", "mitigated"),
                         ("status monitoring", "monitoring"), ("status investigating", "investigating"),
                         (f"status {key} resolved", "resolved")):
        w.command(text)
        assert w.services.incidents.get(incident_key=key).status == status
        update = w.last("chat.update").params
        assert update["ts"] == root_ts and status in update["text"]  # the root message follows
    assert any("Write the postmortem?" in post["text"] for post in w.thread(key))
    assert "Type `/triage status" in w.command(f"status {key} done").text


@walk("`/triage assign [INC-n] @person <role>`")
def walk_assign(w: Walker) -> None:
    key = w.open_incident()
    for text, user, role in ((f"assign <@{BOB}> owner", BOB, "owner"),
                             (f"assign {key} <@{CAROL}> owner:fabric", CAROL, "owner:fabric"),
                             (f"assign <@{DAVE}> scribe", DAVE, "scribe"),
                             (f"assign {key} <@{ERIN}> observer", ERIN, "observer")):
        w.command(text)
        assert user in w.services.incidents.get(incident_key=key).holders(role), text
        assert any(message.startswith(f"You are now {role} on {key}") for message in w.dms(user))
    assert "is not a role" in w.command(f"assign <@{BOB}> owner:network").text

    w.command(f"assign <@{BOB}> commander", user=BOB)  # only the commander hands over command
    assert w.services.incidents.get(incident_key=key).holders("commander") == (ALICE,)
    assert any(f"Only the commander (<@{ALICE}>)" in text for text in w.ephemerals(BOB))
    w.command(f"assign <@{BOB}> commander", user=ALICE)
    assert w.services.incidents.get(incident_key=key).holders("commander") == (BOB,)
    w.command(f"assign <@{CAROL}> commander", user=ADMIN)  # or an admin (TRIAGE_ADMIN_USER_IDS)
    assert w.services.incidents.get(incident_key=key).holders("commander") == (CAROL,)


@walk("`/triage note [INC-n] <text>`")
def walk_note(w: Walker) -> None:
    key = w.open_incident()
    w.command("note NCCL timeouts started after the driver upgrade", user=BOB)
    w.command(f"note {key} rank 7 restarted twice")
    notes = [item for item in w.services.incidents.timeline(key) if item.kind == "note"]
    assert [(item.actor, item.text) for item in notes] == [
        (BOB, "NCCL timeouts started after the driver upgrade"),
        (ALICE, "rank 7 restarted twice"),
    ]
    assert any("noted: rank 7 restarted twice" in post["text"] for post in w.thread(key))


@walk("`/triage snapshot [INC-n]`", cluster=True)
def walk_snapshot(w: Walker) -> None:
    key = w.open_incident()
    assert "Taking a bounded snapshot" in w.command("snapshot").text
    w.command(f"snapshot {key}")
    assert len(w.services.incidents.snapshots(incident_key=key)) == 3
    findings = [post for post in w.thread(key) if post["text"].startswith("Verdict:")]
    assert len(findings) == 3
    for post in findings:  # the Re-run snapshot button on every findings message
        buttons = [
            element
            for block in post["blocks"]
            if block.get("type") == "actions"
            for element in block["elements"]
            if element.get("action_id") == findings_blocks.RERUN_ACTION
        ]
        assert [button["value"] for button in buttons] == [key]
    w.click(action_id=findings_blocks.RERUN_ACTION, value=key, user=BOB)
    assert len(w.services.incidents.snapshots(incident_key=key)) == 4
    assert len([post for post in w.thread(key) if post["text"].startswith("Verdict:")]) == 4


@walk("`/triage list`")
def walk_list(w: Walker) -> None:
    first = w.open_incident("ml/train-a")
    second = w.open_incident("ml/train-b")
    w.command(f"resolve {second}", user=ALICE)
    assert w.services.incidents.get(incident_key=second).status == "resolved"
    w.slack.clear()
    w.command("list", user=BOB)
    assert w.slack.calls_to("chat.postMessage") == []  # nothing in the channel: only BOB sees it
    (shown,) = w.ephemerals(BOB)
    assert f"*{first}*" in shown and "ml/train-a" in shown and second not in shown


@walk("`/triage job <id> compare <healthy-id>`, `/triage compare [INC-n] <healthy-id>`", cluster=True)
def walk_compare(w: Walker) -> None:
    # Refused in production before the one builder: now the README's own example works everywhere.
    assert "Opening an incident" in w.command(f"job {FAILING} compare {HEALTHY}").text
    thread = w.thread("INC-0001")
    findings = next(index for index, post in enumerate(thread) if post["text"].startswith("Verdict:"))
    diff = next(index for index, post in enumerate(thread) if "difference(s) between" in post["text"])
    assert findings < diff  # the diff is against the snapshot just taken
    shown = _plain(thread[diff])
    assert "gpu-node-03, gpu-node-07" in shown and "2.21.5" in shown  # placement, and the NCCL version
    (entry,) = [item for item in w.services.incidents.timeline("INC-0001") if item.kind == "comparison"]
    ranked = [item["rank"] for item in entry.data["differences"]]
    categories = [item["category"] for item in entry.data["differences"]]
    assert ranked == sorted(ranked) and entry.data["healthy"] == HEALTHY
    assert categories.index("event_reason") < categories.index("version") < categories.index("placement")

    w.command(f"compare INC-0001 {HEALTHY}")
    w.command(f"compare {HEALTHY}")
    assert [item.kind for item in w.services.incidents.timeline("INC-0001")].count("comparison") == 3

    posted = len(w.slack.calls_to("chat.postMessage"))
    for bad in ("compare INC-0001 ml/../etc", f"job {FAILING} compare not a target"):
        refusal = w.command(bad).text
        assert "job, jobset, pytorchjob, aiperfjob" in refusal, refusal  # refused at once, with the forms
    assert len(w.slack.calls_to("chat.postMessage")) == posted


@walk("`/triage fabric [INC-n]`", cluster=True)
def walk_fabric(w: Walker) -> None:
    key = w.open_incident()
    for text in ("fabric", f"fabric {key}"):
        w.slack.clear()
        w.command(text)
        (post,) = [post for post in w.thread(key)]
        shown = _plain(post)
        assert "Scope: path-local" in shown
        assert "gpu-node-03" in shown and "gpu-node-07" in shown and "mlx5_2" in shown  # hosts and HCA
        assert re.search(r"ranks?\b", shown) and "NCCL WARN NET/IB" in shown  # ranks and the evidence lines
    scopes = [item for item in w.services.incidents.timeline(key) if item.kind == "fabric_scope"]
    assert len(scopes) == 2 and scopes[0].data["scope"]["pair"] == ["gpu-node-03", "gpu-node-07"]


@walk("`/triage fabric [INC-n] probe`", cluster=True)
def walk_fabric_probe(w: Walker) -> None:
    key = w.open_incident()
    started: list[object] = []
    w.monkeypatch.setattr(node_probe, "run_bounded", lambda **kwargs: started.append(kwargs))  # a spy
    w.command("fabric probe")
    said = w.thread(key)[-1]["text"]
    assert said.startswith("No probe ran: no node probe runner is configured")
    assert "TRIAGE_NODE_PROBE_RUNNER=srun" in said and "TRIAGE_NODE_PROBE_IMAGE" in said and started == []
    w.monkeypatch.undo()

    # With the operator's runner (a stand-in srun that records its argv and answers a published ibstat).
    bin_dir, calls = w.tmp_path / "bin", w.tmp_path / "srun-calls"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncat {IBSTAT}\n')
    (bin_dir / "srun").chmod(0o755)
    w.monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    w.services.core.settings = w.services.settings.model_copy(update={"node_probe_runner": "srun"})
    w.command(f"fabric {key} probe")
    ran = calls.read_text().splitlines()
    assert [line.split()[:2] for line in ran] == [["-w", "gpu-node-03"], ["-w", "gpu-node-07"]]
    assert all("--time=1" in line and line.endswith("-- ibstat") for line in ran)  # capped, ibstat only
    assert w.thread(key)[-1]["text"].startswith("Probe (`ibstat`, 30 s cap per node) on gpu-node-03, gpu-node-07")


@walk("`/triage config cluster <name>`")
def walk_config_cluster(w: Walker) -> None:
    # No cluster list: the single-cluster variables make one Kubernetes (`kubernetes`) and one Slurm (`slurm`).
    w.command("config cluster kubernetes")
    assert w.services.incidents.channel_cluster(channel_id=CHANNEL) == "kubernetes"  # stored
    assert any("set this channel's default cluster to *kubernetes* (was none)" in post["text"] for post in w.roots())
    w.command("config cluster", user=BOB)
    shown = w.ephemerals(BOB)[-1]
    assert "This channel's default cluster: *kubernetes*" in shown and "`slurm` (Slurm)" in shown
    w.command("config cluster prod-north", user=BOB)  # unknown names are refused with the list
    assert "There is no cluster `prod-north`" in w.ephemerals(BOB)[-1] and "kubernetes (Kubernetes)" in w.ephemerals(
        BOB)[-1]
    assert w.services.incidents.channel_cluster(channel_id=CHANNEL) == "kubernetes"
    w.monkeypatch.setattr(w.services.core.incidents, "policy", dataclasses.replace(
        w.services.core.policy, snapshot_allowed=frozenset({ALICE})))  # only users who may run snapshots
    w.command("config cluster none", user=BOB)
    assert "snapshot allow-list" in w.ephemerals(BOB)[-1]
    w.command("config cluster none")
    assert w.services.incidents.channel_cluster(channel_id=CHANNEL) is None


@walk("`/triage help`")
def walk_help(w: Walker) -> None:
    w.command("help", user=BOB)
    (shown,) = w.ephemerals(BOB)
    for subcommand in w.services.subcommands.values():  # every registered subcommand, whoever added it
        assert f"/triage {subcommand.usage}" in shown, subcommand.usage
    readme_names = {match.group(1) for row in ROWS if (match := re.match(r"`/triage (\w[\w-]*)", row))}
    assert readme_names <= set(w.services.subcommands)


@walk("`/triage change`")
def walk_change_form(w: Walker) -> None:
    key = w.open_incident()
    w.command("change", user=BOB, trigger_id="4242.lab.change-form")
    opened = w.last("views.open")
    assert opened.params["trigger_id"] == "4242.lab.change-form"
    view = _view(opened)
    inputs = {block["block_id"] for block in view["blocks"] if block["type"] == "input"}
    assert {"what", "variable", "expected_effect", "metric", "baseline", "threshold", "rollback_plan",
            "approved_by"} <= inputs
    answers = {"what": "Pin NCCL_IB_HCA to mlx5_0..3", "variable": "NCCL_IB_HCA", "expected_effect": "no IB errors",
               "metric": "busbw", "unit": "GB/s", "baseline": "150", "threshold": "180"}
    refused = w.submit(view=view, user=BOB, **answers)  # no rollback plan
    assert refused.payload.get("response_action") == "errors" and "rollback_plan" in refused.payload["errors"]
    assert w.services.core.changes.for_incident(incident_key=key) == ()
    w.submit(view=view, user=BOB, **answers, rollback_plan="unset NCCL_IB_HCA", approved_by=ALICE)
    (change,) = w.services.core.changes.for_incident(incident_key=key)
    assert (change.variable, change.rollback_plan, change.approved_by) == ("NCCL_IB_HCA", "unset NCCL_IB_HCA", ALICE)
    proposed = next(post for post in w.thread(key) if "proposed change #1" in post["text"])
    buttons = json.dumps(proposed["blocks"])
    assert change_blocks.APPLIED_ACTION in buttons and change_blocks.ROLLED_BACK_ACTION in buttons
    w.click(action_id=change_blocks.APPLIED_ACTION, value=str(change.id), user=BOB, message_ts="1700000001.000042")
    assert w.services.core.changes.get(change_id=change.id).state.value == "applied"
    updated = w.last("chat.update").params  # the change's message now offers the next step
    assert updated["ts"] == "1700000001.000042" and change_blocks.VALIDATED_ACTION in json.dumps(updated["blocks"])
    w.command("change", user=BOB)  # one lever at a time: a second change while #1 is unvalidated warns
    w.submit(view=_view(w.last("views.open")), user=BOB, **{**answers, "variable": "NCCL_ALGO"},
             rollback_plan="unset NCCL_ALGO")
    second = next(post for post in w.thread(key) if "proposed change #2" in post["text"])
    assert "one lever at a time" in json.dumps(second["blocks"])
    w.click(action_id=change_blocks.ROLLED_BACK_ACTION, value="2", user=BOB)
    assert w.services.core.changes.get(change_id=2).state.value == "rolled_back"
    w.command(f"measure {change.id} +15m 190GB/s", user=BOB)
    w.command(f"measure {change.id} +60m 186GB/s", user=BOB)
    w.click(action_id=change_blocks.VALIDATED_ACTION, value=str(change.id), user=BOB)
    assert w.services.core.changes.get(change_id=change.id).state.value == "validated"


@walk("`/triage change <variable> | <what> | <effect> | <metric> | <rollback> [| 400 -> 2000 steps]`")
def walk_change_line(w: Walker) -> None:
    key = w.open_incident()
    w.command("change per-rank batch | batch 32 -> 16 | no OOM | steps between restarts | batch back to 32 "
              "| 400 -> 2000 steps", user=BOB)
    (change,) = w.services.core.changes.for_incident(incident_key=key)
    assert (change.variable, change.what, change.rollback_plan) == ("per-rank batch", "batch 32 -> 16", "batch back to 32")
    assert (change.baseline, change.threshold, change.unit) == (400, 2000, "steps")
    w.command("change NCCL_ALGO | force Ring | busbw up | busbw | unset NCCL_ALGO", user=BOB)  # no threshold
    assert w.services.core.changes.get(change_id=2).threshold is None
    w.command("change per-rank batch | batch 16 | no OOM | steps |", user=BOB)
    assert any("rollback plan is required" in text for text in w.ephemerals(BOB))
    assert len(w.services.core.changes.for_incident(incident_key=key)) == 2

    w.command("change 1 applied", user=BOB)
    assert w.services.core.changes.get(change_id=1).state.value == "applied"
    windows = w.services.core.tasks.tasks(incident_key=key, kind="validation_window")
    assert len([job for job in windows if not job.done_at]) == 2
    w.command("change 1 rolled-back", user=BOB)
    assert w.services.core.changes.get(change_id=1).state.value == "rolled_back"
    w.command("change NCCL_MIN_NCHANNELS | 16 -> 32 | busbw up | busbw | unset it | 150 -> 180 GB/s", user=BOB)
    w.command("change 3 applied", user=BOB)
    w.command("measure 3 +15m 190GB/s", user=BOB)
    w.command("measure 3 +60m 191GB/s", user=BOB)
    w.command("change 3 validated", user=BOB)
    assert w.services.core.changes.get(change_id=3).state.value == "validated"


@walk("`/triage measure <n> <window> <value><unit> [vs <baseline> -> <threshold>]`")
def walk_measure(w: Walker) -> None:
    w.open_incident()
    w.command("change per-rank batch | batch 32 -> 16 | no OOM | steps | batch back to 32 | 400 -> 2000 steps")
    w.command("change 1 applied")
    w.command("measure 1 +15m 2400steps", user=BOB)
    (measured,) = w.services.core.changes.get(change_id=1).measurements
    assert (measured.window, measured.value, measured.unit) == ("+15m", 2400, "steps")
    assert w.uploaded(title="Change #1: steps per window") == []  # one window: no chart yet
    w.command("change 1 validated")
    assert any("cannot be validated yet" in text for text in w.ephemerals(ALICE))  # one window is not enough
    w.command("measure 1 +60m 2500steps", user=BOB)
    (chart,) = w.uploaded(title="Change #1: steps per window")
    assert chart.startswith(b"\x89PNG")  # a PNG of the windows, in the thread
    w.command("change 1 validated")
    assert w.services.core.changes.get(change_id=1).state.value == "validated"

    # Two windows that do not both beat the baseline and reach the threshold do not validate.
    w.command("change per-rank batch | batch 16 -> 8 | no OOM | steps | batch back to 16 | 400 -> 2000 steps")
    w.command("measure 2 +15m 2400steps")
    w.command("measure 2 +60m 900steps")
    w.command("change 2 validated")
    assert w.services.core.changes.get(change_id=2).state.value != "validated"
    assert not w.services.core.changes.get(change_id=2).gain_repeated
    assert "Type `/triage measure" in w.command("measure 1 soon").text

    # A one-line change without a target: the first measurement names baseline and threshold, later ones reuse them.
    w.command("change NCCL_ALGO | force Ring | busbw up | busbw | unset NCCL_ALGO")
    w.command("measure 3 +15m 190GB/s", user=BOB)
    assert any("no baseline or acceptance threshold" in text and "vs <baseline> -> <threshold>" in text
               for text in w.ephemerals(BOB))
    w.command("measure 3 +15m 190GB/s vs 150 -> 180", user=BOB)
    w.command("measure 3 +60m 188GB/s", user=BOB)
    third = w.services.core.changes.get(change_id=3)
    assert (third.baseline, third.threshold, len(third.measurements)) == (150, 180, 2) and third.gain_repeated


@walk("`/triage handoff`")
def walk_handoff(w: Walker) -> None:
    key = w.open_incident()
    w.command("change per-rank batch | batch 32 -> 16 | no OOM | steps | batch back to 32")
    w.command("note next: rerun the nightly benchmark")
    w.command("handoff", user=BOB)
    assert any(post["text"].startswith(f":page_facing_up: Handoff for {key}") for post in w.thread(key))
    (markdown,) = w.uploaded(title=f"{key} handoff")
    text = markdown.decode()
    for section in ("Scope and owner", "Versions and placement", "Commands and timestamps",
                    "Expected versus observed", "Changes and rollback", "Remaining limitations", "Next action"):
        assert f"## {section}" in text, section
    assert "kubectl get pod" in text and "Rollback plan: batch back to 32" in text
    assert "rerun the nightly benchmark" in text.split("## Next action", 1)[1]

    w.command(f"assign <@{BOB}> owner")  # also automatic when the owner changes...
    assert len(w.uploaded(title=f"{key} handoff")) == 2
    assert f"Owner: <@{BOB}>" in w.uploaded(title=f"{key} handoff")[-1].decode()
    w.command(f"assign <@{CAROL}> commander")  # ...or the commander
    assert len(w.uploaded(title=f"{key} handoff")) == 3
    w.command(f"assign <@{DAVE}> scribe")  # not for other roles
    assert len(w.uploaded(title=f"{key} handoff")) == 3


@walk("`/triage postmortem`")
def walk_postmortem(w: Walker) -> None:
    key = w.open_incident()
    w.command("note summary: the trainer ran out of memory after the tokenizer upgrade")
    w.command("note impact: fine-tune stalled 70 minutes")
    w.command("postmortem")
    (first,) = w.uploaded(title=f"{key} postmortem")
    text = first.decode()
    assert text.startswith(f"# Postmortem: {key}")
    assert "tokenizer upgrade" in text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert "stalled 70 minutes" in text.split("## Impact", 1)[1].split("\n## ", 1)[0]
    assert "_not recorded_" in text.split("## Root cause", 1)[1].split("\n## ", 1)[0]  # missing shows as such

    w.command("note root cause: tokenizer 0.20 pads to 8192 tokens")
    w.command("resolve pinned tokenizer 0.19")
    offered = next(post for post in w.thread(key) if "Write the postmortem?" in post["text"])
    assert POSTMORTEM_ACTION in json.dumps(offered["blocks"])  # offered on resolve
    w.click(action_id=POSTMORTEM_ACTION, value=key)
    second = w.uploaded(title=f"{key} postmortem")[-1].decode()
    assert "pads to 8192 tokens" in second.split("## Root cause", 1)[1].split("\n## ", 1)[0]
    assert "pinned tokenizer 0.19" in second.split("## Remediation", 1)[1].split("\n## ", 1)[0]


@walk("`/triage prevent @owner YYYY-MM-DD <action> | <guardrail check>`")
def walk_prevent(w: Walker) -> None:
    key = w.open_incident()
    due = (w.clock.now + timedelta(days=2)).date()
    w.command(f"prevent <@{BOB}> {due.isoformat()} Pin tokenizer versions in the image | CI fails on a padded-length diff")
    (action,) = w.services.core.prevention.for_incident(incident_key=key)
    assert (action.owner, action.due_on, action.guardrail_check) == (BOB, due, "CI fails on a padded-length diff")
    assert any(post["text"].startswith(f":shield: Prevention #{action.id} for <@{BOB}>") for post in w.thread(key))

    w.clock.now = w.clock.now.replace(year=due.year, month=due.month, day=due.day, hour=9, minute=1)
    w.services.core.runner.run_due()  # the owner is reminded on the due date
    assert any(f"Prevention action #{action.id}" in text and "is due" in text for text in w.dms(BOB))

    w.clock.advance(timedelta(days=7))  # overdue by the weekly digest
    w.services.core.runner.run_due()
    digests = [post["text"] for post in w.roots() if post["text"].startswith("Overdue prevention actions")]
    assert len(digests) == 1 and f"{key} #{action.id} <@{BOB}>" in digests[0]


@walk("`/triage resolve [remediation]`, `/triage reopen INC-n`, `/triage severity <level>`")
def walk_commander_only(w: Walker) -> None:
    key = w.open_incident()
    w.command("severity critical", user=BOB)
    assert w.services.incidents.get(incident_key=key).severity != "critical"
    assert any(f"Only the commander (<@{ALICE}>) or an admin (<@{ADMIN}>)" in text for text in w.ephemerals(BOB))
    w.command("severity critical")
    assert w.services.incidents.get(incident_key=key).severity == "critical"
    w.command("severity low", user=ADMIN)
    assert w.services.incidents.get(incident_key=key).severity == "low"

    w.command("resolve", user=BOB)
    assert w.services.incidents.get(incident_key=key).status != "resolved"
    assert sum("can resolve" in text and f"<@{ALICE}>" in text for text in w.ephemerals(BOB)) == 1
    w.command("resolve restored the 64Gi limit")
    assert w.services.incidents.get(incident_key=key).status == "resolved"
    assert any(item.text == "remediation: restored the 64Gi limit" for item in w.services.incidents.timeline(key))

    w.command(f"reopen {key}", user=BOB)
    assert w.services.incidents.get(incident_key=key).status == "resolved"
    assert any("can reopen" in text for text in w.ephemerals(BOB))
    w.command(f"reopen {key}")
    assert w.services.incidents.get(incident_key=key).status == "investigating"


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@walk("`/triage node <name>`")
def walk_node(w: Walker) -> None:
    with running_lab(tmp_path=_fresh(w.tmp_path / "node-lab"), scenario="node-xid") as node_lab:
        lab_settings = node_lab.settings(deadline_seconds=5.0, call_timeout_seconds=2.0)

        def on_node_lab(*, target: Target, settings: Settings, **_: Any) -> SnapshotReport:
            del settings
            return diagnose(target=target, settings=lab_settings)

        w.services.incidents.diagnoser = on_node_lab  # a cluster with a GPU node that fell off the bus
        w.command("node gpu-node-05")
        (incident,) = [item for item in w.services.incidents.list_open() if item.target == "node:gpu-node-05"]
        posted = _plain({"blocks": w.thread(incident.key)})
        assert "kubectl cordon gpu-node-05" in posted and "never run" in posted  # the exact commands, shown
        (stored,) = w.services.incidents.snapshots(incident_key=incident.key)
        assert stored["target_kind"] == "node" and stored["verdict"]["layer"] == "runtime"
        kinds = {item["kind"] for item in stored["observations"]}
        assert {"node_condition", "node_capacity"} & kinds  # conditions and allocatable against capacity
        w.command("node gpu-node-05", user=BOB)  # one open incident per node: the second links it
        assert len([item for item in w.services.incidents.list_open() if item.target == "node:gpu-node-05"]) == 1
        assert any(f"{incident.key} is already open" in text for text in w.ephemerals(BOB))
        w.command(f"handoff {incident.key}")
        (handoff,) = w.uploaded(title=f"{incident.key} handoff")
        assert b"node:gpu-node-05" in handoff


@walk("Alertmanager fires an alert (`POST /alerts/alertmanager`)")
def walk_alert_intake(w: Walker) -> None:
    from tests.bot.alerts.payloads import RULES, notification, xid
    from tests.handlers.ops.test_alert_intake import RESOLVED_AT, TOKEN, post_alerts

    rules = w.tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    with SlackApiStandIn() as slack:
        url = f"sqlite:///{w.tmp_path / 'alerts.db'}"
        settings = lab_settings(database_url=url, slack=slack).model_copy(
            update={"alerts_token": TOKEN, "alerts_rules_path": rules, "kubeconfig": w.lab.kubeconfig,
                    "slurm_backend": "off"}
        )
        bot = make_bot(database_url=url, slack=slack, settings=settings, diagnoser=diagnose)
        with serving(bot, slack=slack) as running:  # alerts always arrive over HTTP, whatever Slack's transport
            storm = [xid(node="gpu-node-03", gpu=str(gpu)) for gpu in range(8)]  # one node, eight GPUs
            assert post_alerts(running, notification(*storm), token="wrong-token").status_code == 401
            assert running.services.incidents.list_open() == []
            for _ in range(2):  # the storm, and Alertmanager's repeat of it: one incident
                assert post_alerts(running, notification(*storm)).status_code == 200
            (incident,) = running.services.incidents.list_open()
            assert incident.target == "node:gpu-node-03"
            posts = slack.calls_to("chat.postMessage")
            roots = [call for call in posts if "thread_ts" not in call.params]
            assert len(roots) == 1 and "DCGMXidErrors" in _plain(roots[0].params)
            assert any("in Alertmanager: http://alertmanager:9093" in _plain(call.params) for call in posts)
            assert len(running.services.incidents.snapshots(incident_key=incident.key)) == 1  # taken as the bot
            resolved = [dict(item, status="resolved", endsAt=RESOLVED_AT) for item in storm]
            post_alerts(running, notification(*resolved))
            kinds = [item.kind for item in running.services.incidents.timeline(incident.key)]
            assert "alert_resolved" in kinds and kinds[-1] == "alerts_all_resolved"
            assert any("Every alert" in str(call.params.get("text")) for call in slack.calls_to("chat.postMessage"))
            assert running.services.incidents.get(incident_key=incident.key).status == "investigating"


# --- running them --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One lab cluster (nccl-ib: a failing PyTorchJob, its healthy sibling, a busy cluster) for every walk."""
    with running_lab(tmp_path=tmp_path_factory.mktemp("lab"), scenario="nccl-ib") as running:
        yield running


@pytest.fixture(scope="module")
def migrated_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the head migration, copied for each walk (migrating once keeps the walk fast)."""
    path = tmp_path_factory.mktemp("db") / "template.db"
    db.upgrade(url=f"sqlite:///{path}")
    return path


@contextlib.contextmanager
def walker(
    *, transport: str, row: str, lab: Lab, database: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Walker]:
    """The bot from the one builder (SQLite, the lab cluster or the demo diagnoser, a hand-moved clock)."""
    shutil.copy(database, tmp_path / "walk.db")
    clock = FakeClock(start=utcnow())
    cluster_settings = lab.settings(deadline_seconds=5.0, call_timeout_seconds=2.0).model_copy(
        update={"slurm_backend": "off"}
    )

    def lab_diagnoser(*, target: Target, settings: Settings) -> SnapshotReport:
        del settings
        return diagnose(target=target, settings=cluster_settings)

    with SlackApiStandIn() as slack:
        settings = Settings(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=slack.base_url,
            DATABASE_URL=f"sqlite:///{tmp_path / 'walk.db'}",
            TRIAGE_SCHEDULER_ENABLED=False,
            TRIAGE_ADMIN_USER_IDS=ADMIN,
        )
        bot = make_bot(
            database_url=settings.database_url,
            slack=slack,
            settings=settings,
            diagnoser=lab_diagnoser if row in NEEDS_CLUSTER else minimal_diagnoser,
            clock=clock,
        )
        connect = socket_serving if transport == "socket" else serving
        with connect(bot, slack=slack) as running:
            yield Walker(transport=transport, running=running, clock=clock, lab=lab, monkeypatch=monkeypatch,
                         tmp_path=tmp_path)


def _row_id(row: str) -> str:
    return re.sub(r"\s+", " ", row.replace("`", "").replace("/triage ", "")).strip()[:60]


def test_the_readme_tables_and_the_walks_match_row_for_row() -> None:
    missing = sorted(set(ROWS) - set(WALKS))
    stale = sorted(set(WALKS) - set(ROWS))
    assert not missing, f"README rows without a walk in {Path(__file__).name}: {missing}"
    assert not stale, f"walks whose README row is gone (renamed or deleted?): {stale}"


@pytest.mark.parametrize("transport", ["http", "socket"])
@pytest.mark.parametrize("row", list(ROWS), ids=[_row_id(row) for row in ROWS])
def test_each_readme_row_does_what_it_says_through_the_one_builder(
    row: str,
    transport: str,
    lab: Lab,
    migrated_database: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert row in WALKS, f"the README row {row} has no walk: add one to {Path(__file__).name}"
    with walker(
        transport=transport, row=row, lab=lab, database=migrated_database, tmp_path=tmp_path, monkeypatch=monkeypatch
    ) as w:
        WALKS[row](w)
