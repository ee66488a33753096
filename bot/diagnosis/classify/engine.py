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
    {"api_forbidden", "api_group_missing", "collector_incomplete", "container_spec", "slurm_accounting",
     "target_health", "log_skipped", "pods_not_found", "gpu_operator_pods"}
)
# The collector's statement of whether the target is failing now (Kubernetes): a healthy target gets no layer.
HEALTH_KIND = "target_health"
# Whole log tails repeat the log lines the collectors already picked out: they only add rules nothing else hit.
LATE_KINDS = frozenset({"log_tail"})
_SCOPE_HINT_KIND = "fabric_scope"
# Log and free-text lines no rule matched go to the learned model even when no trouble word flags them.
LINE_KINDS = frozenset({"log_line", "text"})
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
    sources: frozenset[int] = frozenset()

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
        if found and rule.text_matches(found.group(2)):
            count += int(found.group(1))
    return count, int(total_match.group(1))


def _excerpt(text: str) -> str:
    """Keep the evidence line whole unless huge; say so when shortened."""
    if len(text) <= MAX_EXCERPT_CHARS:
        return text
    return f"{text[:MAX_EXCERPT_CHARS]} … [{len(text) - MAX_EXCERPT_CHARS} more chars in the snapshot]"


def _first(fields: dict, names: Sequence[str]) -> str | None:
    return next((str(fields[name]) for name in names if fields.get(name)), None)


def places(observations: Sequence[findings.Observation]) -> tuple[set[str], set[frozenset[str]]]:
    """Distinct nodes and node-to-node links the observations name, counting each node once.

    A log line's host is resolved to its node by the collector (`host_node`, `peer_node`) before it gets here,
    so a pod's hostname, its IP and its node are one place; a name that could not be resolved counts as itself.
    """
    nodes: set[str] = set()
    links: set[frozenset[str]] = set()
    for obs in observations:
        here = _first(obs.fields, ("host_node", "host", "node", "hostname")) or obs.subject or None
        peer = _first(obs.fields, ("peer_node", "peer_host", "peer"))
        if here:
            nodes.add(here)
        if peer:
            nodes.add(peer)
            if here and peer != here:
                links.add(frozenset((here, peer)))
    return nodes, links


def _scope_and_nodes(
    *, rule: catalogue.Rule, observations: Sequence[findings.Observation]
) -> tuple[findings.Scope | None, tuple[str, ...]]:
    """The seed's split for `auto` rules from distinct nodes and links, with the node(s) it names."""
    if not rule.scope_auto:
        return rule.scope, (_named_nodes(observations) if rule.scope is findings.Scope.NODE_LOCAL else ())
    nodes, links = places(observations)
    if rule.layer is findings.Layer.FABRIC:
        if len(links) == 1:
            return findings.Scope.PATH_LOCAL, tuple(sorted(next(iter(links))))
        if links:
            common = set.intersection(*(set(link) for link in links))
            if len(common) == 1:
                return findings.Scope.NODE_LOCAL, tuple(common)
            if len(nodes) >= 3:
                return findings.Scope.FABRIC_WIDE, tuple(sorted(nodes))
            return findings.Scope.PATH_LOCAL, tuple(sorted(nodes))
        # No peer resolved: a transport error still names a path, just not both of its ends.
        return (findings.Scope.FABRIC_WIDE if len(nodes) >= 3 else findings.Scope.PATH_LOCAL), tuple(sorted(nodes))
    if rule.layer is findings.Layer.RUNTIME:
        return findings.Scope.NODE_LOCAL, _named_nodes(observations)
    return findings.Scope.WORKLOAD, ()


def _named_nodes(observations: Sequence[findings.Observation]) -> tuple[str, ...]:
    """The few nodes a node-local finding is about (from `node` fields or node subjects); none when many."""
    named = {str(obs.fields.get("node") or obs.subject.removeprefix("node/")) for obs in observations
             if obs.fields.get("node") or obs.subject.startswith("node/")}
    return tuple(sorted(named)) if 0 < len(named) <= 3 else ()


def derive_scope(
    *, rule: catalogue.Rule, observations: Sequence[findings.Observation]
) -> findings.Scope | None:
    """The rule's scope, or for `auto` rules the seed's node-local / path-local / fabric-wide split."""
    return _scope_and_nodes(rule=rule, observations=observations)[0]


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
    """One finding per rule, citing every observation it matched (bounded, with the count stated).

    When any of them still describes the present, only those are cited; a finding whose every observation is
    history is `current=False` and says what resolved it.
    """
    present = [match for match in matches if match.observation.current]
    matches = present or list(matches)
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
    scope, scope_nodes = _scope_and_nodes(rule=rule, observations=observations)
    where = ""
    if scope is findings.Scope.PATH_LOCAL and len(scope_nodes) == 2:
        where = f" [path {scope_nodes[0]} <-> {scope_nodes[1]}]"
    elif scope is findings.Scope.NODE_LOCAL and len(scope_nodes) == 1 and rule.layer is findings.Layer.FABRIC:
        where = f" [node {scope_nodes[0]}]"
    history = "" if present else f" (history: {first.resolved_by})" if first.resolved_by else " (history)"
    summary = (
        f"{rule.title}{share}{count}{where}{history}: "
        f"{_one_line(first.text or matching.searchable_text(observation=first))}"
    )
    finding = findings.Finding(
        layer=rule.layer,
        rule=rule.id,
        severity=rule.severity,
        summary=summary,
        evidence=evidence,
        next_step=fill_placeholders(template=rule.next_step, observation=first),
        scope=scope,
        scope_nodes=scope_nodes,
        subject=_subjects(observations),
        current=bool(present),
        resolved_by="" if present else first.resolved_by,
    )
    return _Scored(
        finding=finding,
        rule=rule,
        confidence=max(match.confidence for match in matches),
        share=nodes / total if total else 0.0,
        sources=frozenset(id(obs) for obs in observations),
    )


def _link_symptoms(scored: list[_Scored]) -> list[_Scored]:
    """Mark each finding with `explained_by` as `caused_by` the strongest root cause in such a layer.

    Symptoms always declare it; some causes do too (pods pending for GPUs that a failed node withdrew,
    a Slurm job waiting for nodes drained by an Xid). Only undeferrable causes explain, so no cycles.
    """
    roots = sorted(
        (item for item in scored
         if not item.rule.is_symptom and not item.rule.explained_by and item.finding.current),
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
    return _follow_the_majority_reason(linked)


def _follow_the_majority_reason(scored: list[_Scored]) -> list[_Scored]:
    """A scheduler refusal is one decision: when the reason that rejected most nodes in a message is explained
    by a cause elsewhere (GPUs missing on the node claimed for the pod), the minority reasons quoted beside it
    in the same message (the CPU nodes' selector mismatch) are part of that picture, not a competing root."""
    explained = [item for item in scored if item.finding.caused_by and item.share]
    if not explained:
        return scored
    linked = []
    for item in scored:
        if item.share and not item.finding.caused_by and item.rule.layer is findings.Layer.SCHEDULER:
            major = next((other for other in explained if other.share > item.share and other.sources & item.sources
                          and other.rule.layer is item.rule.layer), None)
            if major is not None:
                item = dataclasses.replace(item, finding=dataclasses.replace(
                    item.finding, caused_by=major.finding.caused_by))
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


def _scope_hint_nodes(observations: Sequence[findings.Observation]) -> tuple[str, ...]:
    for obs in observations:
        if obs.kind == _SCOPE_HINT_KIND:
            pair, suspect = obs.fields.get("pair"), obs.fields.get("suspect_host")
            return tuple(pair) if pair else ((str(suspect),) if suspect else tuple(obs.fields.get("hosts") or ()))
    return ()


def _with_scope_hint(*, item: _Scored, hint: findings.Scope | None, nodes: tuple[str, ...] = ()) -> _Scored:
    if hint is None or item.rule.layer is not findings.Layer.FABRIC or not item.rule.scope_auto:
        return item
    finding = dataclasses.replace(item.finding, scope=hint, scope_nodes=nodes or item.finding.scope_nodes)
    return dataclasses.replace(item, finding=finding)


def _health(observations: Sequence[findings.Observation]) -> findings.Observation | None:
    return next((obs for obs in observations if obs.kind == HEALTH_KIND), None)


def _before(history: Sequence[_Scored]) -> str:
    return "before: " + "; ".join(
        item.rule.title + (f" ({item.finding.resolved_by})" if item.finding.resolved_by else "")
        for item in history[:4])


def _no_current_failure(
    *, scored: list[_Scored], health: findings.Observation | None, unexplained: int
) -> findings.Verdict:
    """Layer null: what was checked, what happened before, and what running containers logged meanwhile."""
    history = [item for item in scored if not item.finding.current]
    signals = [item for item in scored if item.finding.current]
    parts = [f"No current failure: {health.text}" if health is not None else "No current failure seen"]
    if history:
        parts.append(_before(history))
    if signals:
        parts.append("seen while it runs, not failing it now: " + ", ".join(item.rule.id for item in signals[:4]))
    if unexplained and health is None:
        parts.append(f"{unexplained} abnormal observation(s) matched no rule")
    return findings.Verdict(layer=None, confidence=0.0, summary=". ".join(parts) + ".")


def _learned_verdict(*, learned: Sequence[findings.Finding]) -> findings.Verdict:
    """A layer from learned findings alone: the calibrated probability is the confidence (so it reaches
    CONFIDENT only when held-out calibration supports it), halved in part by a competing learned layer."""
    top = learned[0]
    confidence = top.confidence or 0.0
    if len(learned) > 1:
        confidence *= 1 - 0.5 * (learned[1].confidence or 0.0) / max(confidence, 1e-9)
    example = top.nearest[0] if top.nearest else None
    like = f"; nearest labelled line ({example.family}, {example.layer}): {_one_line(example.text, limit=100)}" \
        if example else ""
    others = ", ".join(f"{item.layer.value if item.layer else '-'} ({item.confidence:.0%})" for item in learned[1:])
    competing = f"; competing learned layers: {others}" if others else ""
    return findings.Verdict(
        layer=top.layer,
        confidence=round(confidence, 2),
        summary=f"{top.layer.value if top.layer else '-'}: learned from evidence no rule explains "
                f"({top.confidence:.0%} calibrated){like}{competing}",
        scope=top.scope,
    )


def _verdict(
    *, scored: list[_Scored], unexplained: int, health: findings.Observation | None = None,
    learned: Sequence[findings.Finding] = (),
) -> findings.Verdict:
    """One layer from the strongest current, unexplained-by-anything evidence; None when nothing explains it.

    History (observations whose object has since recovered) never makes a verdict, and a target the collector
    found healthy gets no layer, whatever its running containers logged.
    """
    if health is not None and health.fields.get("healthy") is True:
        return _no_current_failure(scored=scored, health=health, unexplained=unexplained)
    current = [item for item in scored if item.finding.current]
    roots = [item for item in current if item.finding.caused_by is None and not item.rule.is_symptom]
    symptom_only = False
    if not roots:
        roots = [item for item in current if item.finding.caused_by is None]
        symptom_only = True
    if not roots:
        history = [item for item in scored if not item.finding.current]
        failing = health is not None and health.fields.get("healthy") is False
        if learned and (failing or not history):
            return _learned_verdict(learned=learned)
        if history and not failing:
            return _no_current_failure(scored=scored, health=health, unexplained=unexplained)
        detail = (
            f"{unexplained} abnormal observation(s) matched no rule" if unexplained else "no anomaly seen"
        )
        if failing:
            detail = f"{health.text}; no rule explains it" + (f"; {detail}" if unexplained else "")
        if history:
            detail += "; " + _before(history)
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
        scope_nodes=top.finding.scope_nodes,
    )


def diagnose_observations(
    observations: Sequence[findings.Observation], *, rules: tuple[catalogue.Rule, ...] | None = None
) -> report.Diagnosis:
    """Classify a snapshot's observations into findings and one verdict (layer None when unknown)."""
    active_rules = load() if rules is None else rules
    grouped: dict[str, list[matching.Match]] = collections.defaultdict(list)
    rule_by_id = {rule.id: rule for rule in active_rules}
    unexplained: list[findings.Observation] = []
    quiet: list[findings.Observation] = []
    relevant = [obs for obs in observations if obs.kind not in IGNORED_KINDS and obs.kind != _SCOPE_HINT_KIND]
    for obs in (item for item in relevant if item.kind not in LATE_KINDS):
        matches = matching.best_matches(rules=active_rules, observation=obs)
        for match in matches:
            grouped[match.rule.id].append(match)
        if not matches and obs.current and anomaly.looks_abnormal(observation=obs):
            unexplained.append(obs)
        elif not matches and obs.current and obs.kind in LINE_KINDS:
            quiet.append(obs)
    seen_rules = set(grouped)
    for obs in (item for item in relevant if item.kind in LATE_KINDS):
        for match in matching.best_matches(rules=active_rules, observation=obs):
            if match.rule.id not in seen_rules:
                grouped[match.rule.id].append(match)
    hint, hint_nodes = _scope_hint(observations), _scope_hint_nodes(observations)
    scored = _link_symptoms(
        [
            _with_scope_hint(item=_build(rule=rule_by_id[rule_id], matches=items), hint=hint, nodes=hint_nodes)
            for rule_id, items in grouped.items()
        ]
    )
    scored.sort(
        key=lambda item: (not item.finding.current, item.finding.caused_by is not None, item.rule.is_symptom,
                          -item.score)
    )
    if scored:
        unexplained = [obs for obs in unexplained if obs.kind not in STATUS_KINDS]
    learned = _learned(unexplained=[*unexplained, *quiet], relevant=relevant, rules=rules)
    return report.Diagnosis(
        verdict=_verdict(scored=scored, unexplained=len(unexplained), health=_health(observations),
                         learned=learned),
        findings=tuple(item.finding for item in scored) + tuple(learned),
        unexplained=tuple(unexplained),
    )


def _learned(
    *, unexplained: Sequence[findings.Observation], relevant: Sequence[findings.Observation],
    rules: tuple[catalogue.Rule, ...] | None,
) -> list[findings.Finding]:
    """Learned findings for evidence no rule explains (unexplained observations, abnormal log-tail lines).

    Only with the packaged catalogue: a caller passing its own rules is testing rules alone. Nothing is
    loaded (numpy, the model) unless some current line is left unexplained.
    """
    if rules is not None:
        return []
    tails = [obs for obs in relevant if obs.kind in LATE_KINDS and obs.current and obs.text]
    if not unexplained and not tails:
        return []
    from bot.diagnosis.classify import hybrid

    pairs = hybrid.unexplained_lines(unexplained=unexplained, tails=tails)
    return hybrid.learned_findings(pairs=pairs)


def load() -> tuple[catalogue.Rule, ...]:
    """The packaged rule catalogue."""
    return catalogue.load_rules()
