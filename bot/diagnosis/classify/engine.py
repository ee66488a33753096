"""Evidence to findings to one verdict: group matches, resolve causes vs symptoms, pick the layer."""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Sequence

from bot.diagnosis.classify import anomaly, catalogue, matching
from bot.evidence import findings, report

# Above this a verdict is "confident"; the lab scenarios must never be confidently wrong.
CONFIDENT = 0.7
MAX_EVIDENCE_PER_FINDING = 20
MAX_EXCERPT_CHARS = 4000
_SEVERITY_WEIGHT = {
    findings.Severity.CRITICAL: 1.0,
    findings.Severity.HIGH: 0.9,
    findings.Severity.MEDIUM: 0.75,
    findings.Severity.LOW: 0.6,
    findings.Severity.INFO: 0.4,
}
# Facts about the snapshot itself or configuration: reported by the snapshot (not checked), never classified.
IGNORED_KINDS = frozenset(
    {"api_forbidden", "api_group_missing", "collector_incomplete", "container_spec", "slurm_accounting"}
)
# Whole log tails repeat the log lines the collectors already picked out: they only add rules nothing else hit.
LATE_KINDS = frozenset({"log_tail"})
_SCOPE_HINT_KIND = "fabric_scope"
# Status summaries (pod Ready=False, Job failed=1) are consequences once any finding explains the target.
STATUS_KINDS = frozenset({"pod_condition", "pod_phase", "workload_status", "workload_condition"})
# "0/16 nodes are available: 12 Insufficient nvidia.com/gpu, 4 node(s) didn't match ..." -> per-reason counts.
_NODES_TOTAL = re.compile(r"\b\d+/(\d+) nodes are available")
_NODES_SEGMENT = re.compile(r"^\s*(\d+) (.+)$")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Scored:
    """A finding under construction with the numbers the verdict needs."""

    finding: findings.Finding
    rule: catalogue.Rule
    confidence: float
    share: float = 0.0

    @property
    def score(self) -> float:
        """Evidence strength: confidence times severity, integrity first (seed decision hierarchy).

        `share` (the fraction of nodes a scheduler message blames on this reason) breaks ties between
        capacity and policy reasons quoted in one FailedScheduling message.
        """
        bonus = 0.1 if self.rule.integrity else 0.0
        return self.confidence * _SEVERITY_WEIGHT[self.rule.severity] + bonus + 0.05 * self.share


def node_share(*, rule: catalogue.Rule, text: str) -> tuple[int, int]:
    """How many of the scheduler's nodes this rule's reason accounts for: (count, total); (0, 0) if not stated."""
    total_match = _NODES_TOTAL.search(text)
    if rule.text is None or total_match is None:
        return 0, 0
    head = text[total_match.end() :].split("preemption:")[0]
    count = 0
    for segment in re.split(r"[,.]\s+", head.lstrip(": ")):
        found = _NODES_SEGMENT.match(segment)
        if found and rule.text.search(found.group(2)):
            count += int(found.group(1))
    return count, int(total_match.group(1))


def _excerpt(text: str) -> str:
    """Keep the evidence line whole unless huge; say so when shortened."""
    if len(text) <= MAX_EXCERPT_CHARS:
        return text
    return f"{text[:MAX_EXCERPT_CHARS]} … [{len(text) - MAX_EXCERPT_CHARS} more chars in the snapshot]"


def _locations(observations: Sequence[findings.Observation]) -> set[str]:
    """Distinct hosts, HCAs or paths the observations name (for fabric scope)."""
    places: set[str] = set()
    for obs in observations:
        named = [str(obs.fields[name]) for name in ("host", "node", "hostname") if obs.fields.get(name)]
        places.update(named or ([obs.subject] if obs.subject else []))
    return places


def derive_scope(
    *, rule: catalogue.Rule, observations: Sequence[findings.Observation]
) -> findings.Scope | None:
    """The rule's scope, or for `auto` rules the seed's node-local / path-local / fabric-wide split."""
    if not rule.scope_auto:
        return rule.scope
    if rule.layer is findings.Layer.FABRIC:
        return findings.Scope.FABRIC_WIDE if len(_locations(observations)) >= 3 else findings.Scope.PATH_LOCAL
    if rule.layer is findings.Layer.RUNTIME:
        return findings.Scope.NODE_LOCAL
    return findings.Scope.WORKLOAD


def fill_placeholders(*, template: str, observation: findings.Observation | None) -> str:
    """Put known names (node, pod, namespace, job...) into a next-step command; keep <name> otherwise."""
    values: dict[str, str] = {}
    if observation is not None:
        values = {
            key: str(value) for key, value in observation.fields.items() if isinstance(value, str | int)
        }
        values.setdefault("subject", observation.subject)
    return _PLACEHOLDER.sub(lambda found: values.get(found.group(1)) or f"<{found.group(1)}>", template)


def _subjects(observations: Sequence[findings.Observation]) -> str:
    names = list(dict.fromkeys(obs.subject for obs in observations if obs.subject))
    if len(names) > 5:
        return ", ".join(names[:5]) + f" (+{len(names) - 5} more)"
    return ", ".join(names)


def _one_line(text: str, *, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _build(*, rule: catalogue.Rule, matches: Sequence[matching.Match]) -> _Scored:
    """One finding per rule, citing every observation it matched (bounded, with the count stated)."""
    observations = list({id(match.observation): match.observation for match in matches}.values())
    first = observations[0]
    evidence = tuple(
        findings.Evidence(
            source=obs.source,
            command=obs.command,
            excerpt=_excerpt(obs.text or matching.searchable_text(observation=obs)),
            observed_at=obs.observed_at,
            expected=rule.expected,
            observed=_one_line(obs.text or matching.searchable_text(observation=obs)),
        )
        for obs in observations[:MAX_EVIDENCE_PER_FINDING]
    )
    count = f" ({len(observations)} observations)" if len(observations) > 1 else ""
    shares = [node_share(rule=rule, text=matching.searchable_text(observation=obs)) for obs in observations]
    nodes, total = max(shares, default=(0, 0))
    share = f"; {nodes} of {total} nodes" if total and nodes else ""
    summary = (
        f"{rule.title}{share}{count}: {_one_line(first.text or matching.searchable_text(observation=first))}"
    )
    finding = findings.Finding(
        layer=rule.layer,
        rule=rule.id,
        severity=rule.severity,
        summary=summary,
        evidence=evidence,
        next_step=fill_placeholders(template=rule.next_step, observation=first),
        scope=derive_scope(rule=rule, observations=observations),
        subject=_subjects(observations),
    )
    return _Scored(
        finding=finding,
        rule=rule,
        confidence=max(match.confidence for match in matches),
        share=nodes / total if total else 0.0,
    )


def _link_symptoms(scored: list[_Scored]) -> list[_Scored]:
    """Mark each finding with `explained_by` as `caused_by` the strongest root cause in such a layer.

    Symptoms always declare it; some causes do too (pods pending for GPUs that a failed node withdrew,
    a Slurm job waiting for nodes drained by an Xid). Only undeferrable causes explain, so no cycles.
    """
    roots = sorted(
        (item for item in scored if not item.rule.is_symptom and not item.rule.explained_by),
        key=lambda item: -item.score,
    )
    linked = []
    for item in scored:
        if item.rule.explained_by:
            explainer = next(
                (root for root in roots if root.rule.layer in item.rule.explained_by and root is not item),
                None,
            )
            if explainer is not None:
                finding = dataclasses.replace(item.finding, caused_by=explainer.rule.id)
                item = dataclasses.replace(item, finding=finding)
        linked.append(item)
    return linked


def _scope_hint(observations: Sequence[findings.Observation]) -> findings.Scope | None:
    """The fabric collector's own scope decision (node-local / path-local / fabric-wide), when it made one."""
    for obs in observations:
        if obs.kind == _SCOPE_HINT_KIND:
            try:
                return findings.Scope(str(obs.fields.get("scope")))
            except ValueError:
                return None
    return None


def _with_scope_hint(*, item: _Scored, hint: findings.Scope | None) -> _Scored:
    if hint is None or item.rule.layer is not findings.Layer.FABRIC or not item.rule.scope_auto:
        return item
    return dataclasses.replace(item, finding=dataclasses.replace(item.finding, scope=hint))


def _verdict(*, scored: list[_Scored], unexplained: int) -> findings.Verdict:
    """One layer from the strongest unexplained-by-anything evidence; None when nothing explains it."""
    roots = [item for item in scored if item.finding.caused_by is None and not item.rule.is_symptom]
    symptom_only = False
    if not roots:
        roots = [item for item in scored if item.finding.caused_by is None]
        symptom_only = True
    if not roots:
        detail = (
            f"{unexplained} abnormal observation(s) matched no rule" if unexplained else "no anomaly seen"
        )
        return findings.Verdict(layer=None, confidence=0.0, summary=f"Layer unknown: {detail}.")
    best_by_layer: dict[findings.Layer, _Scored] = {}
    for item in sorted(roots, key=lambda item: -item.score):
        best_by_layer.setdefault(item.rule.layer, item)
    ranked = sorted(best_by_layer.values(), key=lambda item: -item.score)
    top = ranked[0]
    confidence = top.confidence
    if len(ranked) > 1:
        confidence *= 1 - 0.5 * ranked[1].score / top.score
    downstream = sum(1 for item in scored if item.finding.caused_by)
    parts = [f"{top.rule.layer.value}: {top.rule.title}"]
    if top.finding.subject:
        parts.append(f"on {top.finding.subject}")
    if downstream:
        parts.append(f"({downstream} downstream finding(s) caused by it or another root)")
    if len(ranked) > 1:
        others = ", ".join(f"{item.rule.layer.value} ({item.rule.id})" for item in ranked[1:])
        parts.append(f"; competing evidence: {others}")
    if symptom_only:
        confidence = min(0.5, confidence * 0.6)
        parts.append("; only symptoms seen, root cause not evidenced")
    return findings.Verdict(
        layer=top.rule.layer,
        confidence=round(confidence, 2),
        summary=" ".join(parts).replace(" ;", ";"),
        scope=top.finding.scope,
    )


def diagnose_observations(
    observations: Sequence[findings.Observation], *, rules: tuple[catalogue.Rule, ...] | None = None
) -> report.Diagnosis:
    """Classify a snapshot's observations into findings and one verdict (layer None when unknown)."""
    active_rules = load() if rules is None else rules
    grouped: dict[str, list[matching.Match]] = collections.defaultdict(list)
    rule_by_id = {rule.id: rule for rule in active_rules}
    unexplained: list[findings.Observation] = []
    relevant = [obs for obs in observations if obs.kind not in IGNORED_KINDS and obs.kind != _SCOPE_HINT_KIND]
    for obs in (item for item in relevant if item.kind not in LATE_KINDS):
        matches = matching.best_matches(rules=active_rules, observation=obs)
        for match in matches:
            grouped[match.rule.id].append(match)
        if not matches and anomaly.looks_abnormal(observation=obs):
            unexplained.append(obs)
    seen_rules = set(grouped)
    for obs in (item for item in relevant if item.kind in LATE_KINDS):
        for match in matching.best_matches(rules=active_rules, observation=obs):
            if match.rule.id not in seen_rules:
                grouped[match.rule.id].append(match)
    hint = _scope_hint(observations)
    scored = _link_symptoms(
        [
            _with_scope_hint(item=_build(rule=rule_by_id[rule_id], matches=items), hint=hint)
            for rule_id, items in grouped.items()
        ]
    )
    scored.sort(key=lambda item: (item.finding.caused_by is not None, item.rule.is_symptom, -item.score))
    if scored:
        unexplained = [obs for obs in unexplained if obs.kind not in STATUS_KINDS]
    return report.Diagnosis(
        verdict=_verdict(scored=scored, unexplained=len(unexplained)),
        findings=tuple(item.finding for item in scored),
        unexplained=tuple(unexplained),
    )


def load() -> tuple[catalogue.Rule, ...]:
    """The packaged rule catalogue."""
    return catalogue.load_rules()
