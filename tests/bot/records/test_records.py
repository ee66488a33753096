"""Handoff and postmortem: every seed field filled from the data, gaps shown as gaps, JSON and bundle too."""

from __future__ import annotations

import json
import tarfile
from datetime import UTC, datetime

from bot.changes.charts import PNG_SIGNATURE
from bot.records import build as records
from bot.records import bundle
from tests.bot.records.incident_fixture import incident

NOW = datetime(2026, 11, 20, 17, 0, tzinfo=UTC)


def test_the_handoff_carries_every_seed_field_from_the_data() -> None:
    text = records.render_handoff(record=records.build_handoff(data=incident(), now=NOW))
    for heading in (
        "## Scope and owner",
        "## Versions and placement",
        "## Commands and timestamps",
        "## Expected versus observed",
        "## Changes and rollback",
        "## Remaining limitations and untested paths",
        "## Next action",
    ):
        assert heading in text
    assert "Owner: <@U_BOB>" in text and "Commander: <@U_ALICE>" in text
    assert "image: `nvcr.io/nvidia/pytorch:24.10-py3`" in text
    assert "2026-11-20 14:01:00 UTC `kubectl get events -n train --sort-by=.lastTimestamp`" in text
    assert "expected pod scheduled within 60s; observed Pending for 14m" in text
    assert "Rollback plan: kubectl scale --replicas=4" in text
    assert "Not checked: node GPU health (probes off)" in text
    assert "confirm the policy sync no longer rewrites quotas" in text
    assert records.GAP not in text.split("\n## ", 1)[1]  # only the legend mentions it


def test_missing_facts_are_shown_as_gaps_not_left_out() -> None:
    bare = incident(
        snapshots=(), roles=(), timeline=(), changes=(), prevention=(), validations=(), resolved_at=None
    )
    handoff = records.render_handoff(record=records.build_handoff(data=bare, now=NOW))
    assert f"Owner: {records.GAP}" in handoff
    assert handoff.count(records.GAP) >= 8
    assert "No diagnostic snapshot was taken" in handoff
    postmortem = records.render_postmortem(record=records.build_postmortem(data=bare, now=NOW))
    for heading in (
        "## Summary",
        "## Impact",
        "## Root cause",
        "## Remediation",
        "## Prevention actions",
        "## Recurrence check",
    ):
        section = postmortem.split(heading, 1)[1].split("##", 1)[0]
        assert records.GAP in section, heading


def test_the_next_action_falls_back_to_the_top_findings_next_step() -> None:
    data = incident(timeline=())
    assert (
        records.build_handoff(data=data, now=NOW).next_action == "kubectl describe nodes | grep -A5 Allocated"
    )


def test_the_postmortem_carries_every_required_section_from_the_data() -> None:
    text = records.render_postmortem(record=records.build_postmortem(data=incident(), now=NOW))
    assert "a policy sync shrank the team's GPU quota" in text
    assert "4 researchers blocked" in text
    assert "Duration: 2h 05m" in text
    assert "- 2026-11-20 14:00:00 UTC [opened] <@U_ALICE> Incident opened" in text
    assert "Failing layer: scheduler" in text
    assert "0/4 nodes are available: 4 Insufficient nvidia.com/gpu" in text
    assert "quota for team train lowered to 8 GPUs" in text
    assert "restored the quota to 32 GPUs" in text
    rejected = text.split("## What was tried and rejected", 1)[1].split("##", 1)[0]
    assert "Change #1 Lower replicas from 4 to 2 (rolled_back, gain did not repeat)" in rejected
    assert "owner <@U_CAROL>, due 2026-12-01, guardrail check: quota-diff CI job fails on a drop" in text
    assert "original failure STILL REPRODUCES (rules: k8s.pending.insufficient_gpu)" in text
    assert "![scheduled pods per window for change #1](charts/INC-0001-change-1.png)" in text
    assert records.GAP not in text.split("\n## ", 1)[1]  # only the legend mentions it


def test_the_latest_labelled_note_wins_and_labels_are_case_insensitive() -> None:
    data = incident()
    later = records.TimelineItem(
        at=NOW, kind="note", actor="U_BOB", text="Root-Cause: a stale admission webhook"
    )
    told = records.narrative(timeline=(*data.timeline, later))
    assert told["root cause"] == "a stale admission webhook"


def test_the_json_export_is_plain_json_with_the_same_facts() -> None:
    exported = json.loads(json.dumps(records.build_postmortem(data=incident(), now=NOW).to_dict()))
    assert exported["root_cause"].startswith("quota for team train")
    assert exported["prevention"][0]["owner"] == "U_CAROL"
    assert exported["timeline"][0]["at"] == "2026-11-20T14:00:00Z"


def test_the_evidence_bundle_holds_snapshots_commands_records_and_charts(tmp_path) -> None:
    path = tmp_path / "out" / "INC-0001.tar.gz"
    names = bundle.write_bundle(data=incident(), path=path, now=NOW)
    with tarfile.open(path, "r:gz") as archive:
        assert sorted(archive.getnames()) == sorted(names)
        prefix = "INC-0001-evidence/"
        snapshot_names = [name for name in names if name.startswith(prefix + "snapshots/")]
        assert len(snapshot_names) == 1
        snapshot = json.load(archive.extractfile(snapshot_names[0]))
        assert snapshot["findings"][0]["rule"] == "k8s.pending.insufficient_gpu"
        commands = [
            json.loads(line) for line in archive.extractfile(prefix + "commands.jsonl").read().splitlines()
        ]
        assert {"command", "at", "excerpt", "source"} <= set(commands[0])
        assert commands[0]["excerpt"].startswith("0/4 nodes are available")
        assert archive.extractfile(prefix + "charts/INC-0001-change-1.png").read().startswith(PNG_SIGNATURE)
        manifest = json.load(archive.extractfile(prefix + "manifest.json"))
        assert manifest["incident"] == "INC-0001" and "postmortem.md" in manifest["files"]
    assert not (tmp_path / "out" / "INC-0001.tar.gz.partial").exists()


def test_a_layer_owner_answers_as_owner_when_nobody_owns_the_whole_incident() -> None:
    data = incident(
        roles=(
            records.RoleEntry(role="commander", user="U_ALICE"),
            records.RoleEntry(role="owner:fabric", user="U_CAROL"),
        )
    )
    text = records.render_handoff(record=records.build_handoff(data=data, now=NOW))
    assert "Owner: <@U_CAROL> (owner:fabric)" in text
    assert "- owner:fabric: <@U_CAROL>" not in text


def test_notes_that_mention_a_rollback_are_kept_in_the_handoff_as_unrecorded_changes() -> None:
    note = records.TimelineItem(
        at=NOW, kind="note", actor="U_BOB", text="bumped NCCL_BUFFSIZE (rollback: unset it)"
    )
    data = incident(changes=(), timeline=(note,))
    changes = records.render_handoff(record=records.build_handoff(data=data, now=NOW)).split(
        "## Changes and rollback"
    )[1]
    assert "not a recorded change" in changes and "bumped NCCL_BUFFSIZE (rollback: unset it)" in changes


def test_a_command_rerun_by_later_snapshots_is_listed_once_at_its_last_run() -> None:
    def snapshot(at: str) -> dict[str, object]:
        evidence = {"command": "kubectl describe pod -n ml p", "observed_at": at, "source": "kubernetes",
                    "excerpt": "OOMKilled", "expected": "no OOM", "observed": "OOMKilled"}
        return {"findings": [{"evidence": [evidence]}], "observations": []}

    snapshots = (snapshot("2026-11-29T10:00:00Z"), snapshot("2026-11-29T10:15:00Z"))
    commands = records.evidence_commands(snapshots=snapshots)
    assert [(entry.command, entry.at) for entry in commands] == [
        ("kubectl describe pod -n ml p", "2026-11-29T10:15:00Z")
    ]
    pairs = records._expected_vs_observed(snapshots=snapshots)
    assert [(row.expected, row.observed, row.at) for row in pairs] == [
        ("no OOM", "OOMKilled", "2026-11-29T10:15:00Z")
    ]
