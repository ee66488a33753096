"""diagnose() wires collectors to the classifier; the demo's lab diagnoser runs the same engine."""

from __future__ import annotations

from pathlib import Path

from bot.config import load_settings
from bot.diagnosis.service import diagnose, lab_diagnoser, placement_from
from bot.evidence.findings import Observation, utcnow
from tests.support.kube_lab import running_lab


def test_the_report_keeps_observations_for_the_classifier_and_the_record(tmp_path: Path) -> None:
    with running_lab(tmp_path=tmp_path, scenario="kueue-quota") as lab:
        report = diagnose(target="job/ml/train-llm", settings=lab.settings())
    data = report.to_dict(include_observations=True)
    kinds = {item["kind"] for item in data["observations"]}
    assert {"workload_status", "workload_condition", "kueue_workload", "event"} <= kinds
    assert report.target == "job/ml/train-llm" and report.target_kind == "job"


def test_the_lab_diagnoser_serves_its_scenario_on_first_use() -> None:
    diagnoser = lab_diagnoser(scenario="gpu-xid")
    report = diagnoser(target="ml/train-llm", settings=load_settings())
    assert any(item.fields.get("reason") == "XidError" for item in report.observations)


def test_placement_lists_each_node_once() -> None:
    def phase(node: str) -> Observation:
        return Observation(source="kubernetes", kind="pod_phase", subject="pod/ns/p", text="", command="",
                           observed_at=utcnow(), fields={"node": node})

    assert placement_from([phase("a"), phase("b"), phase("a")]) == {"nodes": "a, b"}


def test_a_slurm_backend_that_is_off_is_reported_as_not_checked_with_what_to_set() -> None:
    report = diagnose(target="slurm:123", settings=load_settings(TRIAGE_SLURM_BACKEND="off"))
    (collector,) = report.collectors
    assert collector.name == "slurm" and collector.outcome.value == "skipped"
    assert report.not_checked == (f"slurm: skipped ({collector.detail})",)
    assert "TRIAGE_SLURM_BACKEND" in collector.detail
