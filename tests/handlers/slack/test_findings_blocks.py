"""Findings in Slack: verdict first, grouped by layer, evidence and next step, buttons, within Slack's limits."""

from __future__ import annotations

from bot.diagnosis.classify import diagnose_observations
from bot.evidence import findings, report
from handlers.slack.blocks import findings as findings_blocks
from tests.bot.diagnosis.classify.observations import AT, observation

TRT = "[TRT] [E] 4: [runtime.cpp::deserializeCudaEngine::50] Error Code 4: Internal Error (Engine deserialization failed.)"


def _snapshot(observations, *, target="job/ns/train") -> report.SnapshotReport:
    diagnosis = diagnose_observations(observations)
    return report.SnapshotReport(
        target=target,
        target_kind="k8s-job",
        taken_at=AT,
        elapsed_ms=1234,
        verdict=diagnosis.verdict,
        findings=diagnosis.findings,
        collectors=(),
        observations=tuple(observations),
        unexplained=diagnosis.unexplained,
    )


def _all_text(blocks) -> str:
    parts = []
    for block in blocks:
        if "text" in block:
            parts.append(block["text"]["text"])
        parts += [
            element.get("text", "")
            for element in block.get("elements", [])
            if isinstance(element.get("text"), str)
        ]
    return "\n".join(parts)


def test_the_verdict_comes_first_then_findings_grouped_by_layer_with_evidence_and_next_step() -> None:
    snapshot = _snapshot(
        [
            observation(kind="log_line", text=TRT),
            observation(
                kind="container_state", text="CrashLoopBackOff", state="waiting", reason="CrashLoopBackOff"
            ),
        ]
    )
    rendered = findings_blocks.render_findings(snapshot=snapshot, incident_key="INC-42")
    blocks = rendered.blocks
    assert blocks[0]["type"] == "header"
    assert "Verdict: `workflow`" in blocks[1]["text"]["text"]
    headers = [block["text"]["text"] for block in blocks if block["type"] == "header"][1:]
    assert headers == ["workflow (1)", "runtime (1)"]
    text = _all_text(blocks)
    assert "Engine deserialization failed" in text
    assert "*Next:*" in text and "trtexec" in text
    assert "kubectl get log_line" in text and "2026-11-29T22:00:00Z" in text
    assert "_caused by_ `workflow.tensorrt-engine-mismatch`" in text
    assert findings_blocks.validate_blocks(blocks) == []
    assert rendered.attachment is None
    assert rendered.text_fallback.startswith("Verdict: workflow")


def test_buttons_carry_the_incident_key_with_the_agreed_action_ids() -> None:
    rendered = findings_blocks.render_findings(
        snapshot=_snapshot([observation(kind="log_line", text=TRT)]), incident_key="INC-7"
    )
    actions = rendered.blocks[-1]
    assert actions["type"] == "actions"
    assert actions["block_id"] == "assign_INC-7"
    rerun, assign = actions["elements"]
    assert (rerun["type"], rerun["action_id"], rerun["value"]) == ("button", "rerun_snapshot", "INC-7")
    # The owner picker is a user select: choosing a person assigns them; the key rides in block_id.
    assert (assign["type"], assign["action_id"]) == ("users_select", "assign_owner")


def test_long_evidence_is_summarised_in_the_message_and_attached_in_full() -> None:
    huge = "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<1> with status=12 " + "x" * 9000
    rendered = findings_blocks.render_findings(
        snapshot=_snapshot([observation(kind="log_line", text=huge)]), incident_key="INC-1"
    )
    assert findings_blocks.validate_blocks(rendered.blocks) == []
    assert findings_blocks.SEE_FILE in _all_text(rendered.blocks)
    assert rendered.attachment is not None and "x" * 3000 in rendered.attachment
    assert "x" * 1000 not in _all_text(rendered.blocks)


def test_many_findings_stay_under_fifty_blocks_and_say_how_many_were_left_for_the_file() -> None:
    lines = [
        "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
        "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
        "exceeded quota: team-quota, requested: nvidia.com/gpu=8",
        TRT,
        "no healthy upstream",
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<1> with status=12",
        "mount.nfs: Connection timed out",
        "ErrImagePull: manifest unknown",
        "OOMKilled",
        "Version tag does not match",
    ]
    observations = [
        observation(kind="log_line", text=line, subject=f"pod/ns/p{n}") for n, line in enumerate(lines)
    ]
    rules = [
        {
            "id": f"runtime.synthetic-{n}",
            "layer": "runtime",
            "title": f"Synthetic {n}",
            "severity": "high",
            "cites": "x",
            "next": "echo",
            "match": {"text": f"marker-{n}\\b"},
        }
        for n in range(40)
    ]
    from bot.diagnosis.classify import catalogue, engine

    extra = catalogue.parse_rules(documents=rules)
    many = observations + [observation(kind="log_line", text=f"marker-{n}") for n in range(40)]
    diagnosis = engine.diagnose_observations(many, rules=catalogue.load_rules() + extra)
    snapshot = report.SnapshotReport(
        target="job/ns/big",
        target_kind="k8s-job",
        taken_at=AT,
        elapsed_ms=1,
        verdict=diagnosis.verdict,
        findings=diagnosis.findings,
        collectors=(),
    )
    rendered = findings_blocks.render_findings(snapshot=snapshot, incident_key="INC-9")
    assert len(diagnosis.findings) > 24
    assert len(rendered.blocks) <= findings_blocks.MAX_BLOCKS
    assert findings_blocks.validate_blocks(rendered.blocks) == []
    assert "did not fit in this message" in _all_text(rendered.blocks)
    assert rendered.attachment is not None
    assert all(item.rule in rendered.attachment for item in diagnosis.findings)


def test_unknown_layer_is_shown_as_unknown_with_the_unexplained_evidence_listed() -> None:
    snapshot = _snapshot([observation(kind="log_line", text="fatal: frobnicator exploded")])
    rendered = findings_blocks.render_findings(snapshot=snapshot, incident_key="INC-3")
    text = _all_text(rendered.blocks)
    assert "Verdict: layer unknown" in text
    assert "frobnicator exploded" in text
    assert findings_blocks.validate_blocks(rendered.blocks) == []


def test_mrkdwn_control_characters_in_evidence_are_escaped() -> None:
    rendered = findings_blocks.render_findings(
        snapshot=_snapshot(
            [observation(kind="log_line", text="Got completion from peer 10.0.0.1<555> & <!channel>")]
        ),
        incident_key="INC-5",
    )
    text = _all_text(rendered.blocks)
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text


def test_validate_blocks_reports_each_broken_limit() -> None:
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 151}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "s" * 3001}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "c" * 2001}]},
        {"type": "section", "text": {"type": "mrkdwn", "text": "  "}},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "b" * 76},
                    "action_id": "",
                    "value": "v",
                }
            ],
        },
        {"type": "banner"},  # not a Slack block (video is one)
    ] + [{"type": "divider"}] * 45
    problems = findings_blocks.validate_blocks(blocks)
    assert any("51 blocks" in item for item in problems)
    for fragment in (
        "limit 150",
        "limit 3000",
        "limit 2000",
        "text is empty",
        "limit 75",
        "action_id",
        "unknown block",
    ):
        assert any(fragment in item for item in problems), fragment


def test_a_long_target_name_in_the_header_is_shortened_visibly_and_attached() -> None:
    snapshot = _snapshot([observation(kind="log_line", text=TRT)], target="job/ns/" + "t" * 200)
    rendered = findings_blocks.render_findings(snapshot=snapshot, incident_key="INC-8")
    assert rendered.blocks[0]["text"]["text"].endswith("…")
    assert rendered.attachment is not None and "t" * 200 in rendered.attachment


def test_verdict_without_findings_is_still_a_valid_message() -> None:
    snapshot = report.SnapshotReport(
        target="job/ns/ok",
        target_kind="k8s-job",
        taken_at=AT,
        elapsed_ms=5,
        verdict=findings.Verdict(layer=None, confidence=0.0, summary="Layer unknown: no anomaly seen."),
        findings=(),
        collectors=(),
    )
    rendered = findings_blocks.render_findings(snapshot=snapshot, incident_key="INC-0")
    assert findings_blocks.validate_blocks(rendered.blocks) == []


def test_findings_without_a_layer_are_shown_last_and_never_dropped() -> None:
    snapshot = _snapshot([observation(kind="log_line", text=TRT)])
    extra = findings.Finding(
        layer=None,
        rule="snapshot.api_group_missing",
        severity=findings.Severity.MEDIUM,
        summary="the cluster does not serve kueue.x-k8s.io",
        evidence=(),
        next_step="kubectl get crd",
    )
    snapshot = report.SnapshotReport(
        target=snapshot.target,
        target_kind="k8s-job",
        taken_at=AT,
        elapsed_ms=1,
        verdict=snapshot.verdict,
        findings=(*snapshot.findings, extra),
        collectors=(),
    )
    rendered = findings_blocks.render_findings(snapshot=snapshot, incident_key="INC-4")
    headers = [block["text"]["text"] for block in rendered.blocks if block["type"] == "header"][1:]
    assert headers[-1] == "no layer (1)"
    assert "kueue.x-k8s.io" in _all_text(rendered.blocks)
    assert findings_blocks.validate_blocks(rendered.blocks) == []
