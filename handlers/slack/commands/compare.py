"""`/triage compare` and `/triage fabric`: the healthy diff and the fabric scope in the incident thread, from
the same core logic the terminal uses (`job <id> compare <healthy>` reuses `compare_and_post`)."""

from __future__ import annotations

import logging
from typing import Any

from bot import markup
from bot.clusters.registry import ClusterError
from bot.diagnosis import compare as compare_mod
from bot.diagnosis.collectors import node_probe
from bot.evidence import redact
from bot.evidence import stored as stored_evidence
from bot.evidence.findings import utcnow
from bot.evidence.report import SnapshotUnavailable
from bot.evidence.targets import ACCEPTED_FORMS, InvalidTarget, Target, parse_target
from bot.incidents import service as lifecycle
from bot.incidents.policy import PermissionRefused
from bot.incidents.service import IncidentView
from handlers.slack import replies
from handlers.slack.blocks import common as blocks
from handlers.slack.blocks import compare as compare_blocks
from handlers.slack.router import INCIDENT_KEY, CommandContext, Subcommand, UsageError

log = logging.getLogger(__name__)

PROBE_WORD = "probe"
PROBE_CAP_SECONDS = 30.0
MAX_PROBED_NODES = 2
TIMELINE_DIFFERENCES_KEPT = 20


def healthy_target(raw: str) -> Target:
    """The healthy sibling's id, or a UsageError that lists the accepted forms."""
    try:
        return parse_target(raw)
    except InvalidTarget as error:
        message = str(error)
        accepted = "" if ACCEPTED_FORMS in message else f" Accepted forms: {ACCEPTED_FORMS}."
        raise UsageError(f"The healthy id is not valid: {message}{accepted}") from None


def _split_incident(rest: str) -> tuple[str | None, list[str]]:
    words = rest.split()
    if words and INCIDENT_KEY.match(words[0]):
        return words[0].upper(), words[1:]
    return None, words


# --- compare ---------------------------------------------------------------------------------------


def _check_compare(rest: str) -> None:
    _key, words = _split_incident(rest)
    if len(words) != 1:
        raise UsageError(f"Type `/triage compare [INC-n] <healthy-id>`; the healthy id is one of: {ACCEPTED_FORMS}.")
    healthy_target(words[0])


def _run_compare(ctx: CommandContext) -> None:
    incident, rest = ctx.incident_and_rest()
    compare_and_post(ctx, incident=incident, healthy=healthy_target(rest.strip()))


def compare_and_post(ctx: CommandContext, *, incident: IncidentView, healthy: Target) -> None:
    """Snapshot the healthy workload, diff it against the incident's latest snapshot, post and record it."""
    services = ctx.services
    healthy, same_cluster = _place_healthy(services, incident=incident, healthy=healthy)
    if same_cluster and healthy.workload_key == parse_target(incident.target).workload_key:
        raise UsageError(f"`{healthy.key}` is this incident's own workload: compare with a healthy sibling.")
    if services.diagnoser is None:
        ctx.post_in_thread(incident, text="No cluster is configured, so no healthy snapshot was taken to compare.")
        return
    if not services.core.policy.may_read_cluster(ctx.user_id):
        ctx.post_in_thread(incident, text=markup.format("No comparison: {}", _refusal(ctx, what="take snapshots")))
        return
    stored = services.incidents.snapshots(incident_key=incident.key)
    if not stored:
        ctx.post_in_thread(
            incident,
            text=markup.format(
                "{} has no stored snapshot to compare yet: take one with `/triage snapshot {}`, then "
                "`/triage compare {} {}`.",
                incident.key,
                incident.key,
                incident.key,
                healthy.key,
            ),
        )
        return
    ctx.post_in_thread(
        incident,
        text=markup.format(
            "{} asked to compare with healthy `{}`: taking a bounded snapshot…", markup.mention(ctx.user_id), healthy.key
        ),
    )
    try:
        report = services.incidents.snapshot_of(target=healthy, settings=services.settings, actor=ctx.user_id)
    except PermissionRefused as refused:
        ctx.post_in_thread(incident, text=markup.format("No comparison: {}", markup.of_error(refused)))
        return
    except SnapshotUnavailable as error:
        _compare_failed(ctx, incident=incident, healthy=healthy, reason=str(error))
        return
    except Exception as error:
        log.exception("healthy snapshot of %s failed for %s", healthy.key, incident.key)
        _compare_failed(ctx, incident=incident, healthy=healthy, reason=f"the snapshot failed ({type(error).__name__})")
        return
    differences = compare_mod.compare_observations(
        failing=stored_evidence.observations_of(stored[-1]), healthy=report.observations
    )
    rendered = compare_blocks.comparison(
        incident_key=incident.key, failing=incident.target, healthy=healthy.key, differences=differences
    )
    _post_rendered(ctx, incident=incident, rendered=rendered, filename=f"{incident.key}-compare.md",
                   title=f"{incident.key} comparison with {healthy.key} (every difference)")
    first = differences[0] if differences else None
    services.incidents.add_timeline_entry(
        incident_key=incident.key,
        actor=ctx.user_id,
        kind="comparison",
        text=(f"Compared with healthy `{healthy.key}`: {len(differences)} difference(s)"
              + (f"; first: {first.category} {first.key} ({first.failing} vs {first.healthy})" if first else ""))[:4000],
        data={"healthy": healthy.key, "healthy_cluster": services.core.clusters.name_for(healthy),
              "count": len(differences),
              "differences": [item.to_dict() for item in differences[:TIMELINE_DIFFERENCES_KEPT]]},
    )


def _place_healthy(services: Any, *, incident: IncidentView, healthy: Target) -> tuple[Target, bool]:
    """The healthy id on its cluster: the one it names, else the incident's own (a sibling in the same or
    another cluster); and whether that is the incident's cluster."""
    clusters = services.core.clusters
    own = incident.cluster or None
    try:
        placed = clusters.resolve(healthy, prefer=own)
    except ClusterError as error:
        raise UsageError(f"The healthy id names no usable cluster: {error}") from None
    default = clusters.default_for(parse_target(incident.target).platform)
    ours = own or (default.name if default is not None else "")
    return placed, clusters.name_for(placed) == ours


def _compare_failed(ctx: CommandContext, *, incident: IncidentView, healthy: Target, reason: str) -> None:
    ctx.services.incidents.add_timeline_entry(
        incident_key=incident.key, actor=lifecycle.BOT_ACTOR, kind="comparison_failed",
        text=f"No comparison with `{healthy.key}`: {reason}"[:4000], data={"healthy": healthy.key},
    )
    ctx.post_in_thread(
        incident,
        text=markup.format(
            "No comparison with `{}`: {}. Check the healthy id (`/triage compare {} <healthy-id>`, one of: {}) "
            "and cluster access.",
            healthy.key,
            reason,
            incident.key,
            markup.Mrkdwn(ACCEPTED_FORMS),
        ),
    )


def _post_rendered(
    ctx: CommandContext, *, incident: IncidentView, rendered: compare_blocks.Rendered, filename: str, title: str
) -> None:
    replies.post(ctx.client, incident, text=rendered.text, blocks_=rendered.blocks)
    if rendered.attachment is not None:
        replies.upload_file(
            ctx.client,
            channel=incident.channel_id,
            thread_ts=incident.thread_ts,
            filename=filename,
            content=rendered.attachment.encode(),
            title=title,
        )


def _refusal(ctx: CommandContext, *, what: str) -> markup.Mrkdwn:
    """The rulebook's own words for a cluster read this caller may not cause."""
    try:
        ctx.services.core.policy.require_cluster_read(actor=ctx.user_id, what=what)
    except PermissionRefused as refused:
        return markup.of_error(refused)
    return markup.Mrkdwn("")


# --- fabric ----------------------------------------------------------------------------------------


def _check_fabric(rest: str) -> None:
    _key, words = _split_incident(rest)
    if words and [word.lower() for word in words] != [PROBE_WORD]:
        raise UsageError("Type `/triage fabric [INC-n]`, or `/triage fabric [INC-n] probe` for the opt-in "
                         f"bounded `ibstat` probe ({PROBE_CAP_SECONDS:g} s cap per node).")


def _run_fabric(ctx: CommandContext) -> None:
    incident, rest = ctx.incident_and_rest()
    probe = rest.strip().lower() == PROBE_WORD
    stored = ctx.services.incidents.snapshots(incident_key=incident.key)
    if not stored:
        ctx.post_in_thread(incident, text=markup.format(
            "{} has no stored snapshot yet: take one with `/triage snapshot {}`, then `/triage fabric {}`.",
            incident.key, incident.key, incident.key))
        return
    evidence = stored_evidence.fabric_evidence(
        observations=stored_evidence.observations_of(stored[-1]), subject=incident.target
    )
    rendered = compare_blocks.fabric(incident_key=incident.key, target=incident.target, scope=evidence.scope,
                                     events=evidence.events, hosts_with_logs=evidence.hosts_with_logs)
    _post_rendered(ctx, incident=incident, rendered=rendered, filename=f"{incident.key}-fabric.md",
                   title=f"{incident.key} NCCL fabric lines")
    scope = evidence.scope
    ctx.services.incidents.add_timeline_entry(
        incident_key=incident.key, actor=ctx.user_id, kind="fabric_scope",
        text=(f"Fabric scope {scope['scope']}: {scope['reason']}" if scope
              else "Fabric: no NCCL transport error or timeout in the latest snapshot")[:4000],
        data={"scope": scope, "events": len(evidence.events)},
    )
    if probe:
        plan = stored_evidence.probe_plan(
            observations=stored_evidence.observations_of(stored[-1]), scope=scope, limit=MAX_PROBED_NODES
        )
        _probe(ctx, incident=incident, plan=plan)


def _probes_refused_on(ctx: CommandContext, *, incident: IncidentView) -> str:
    """Why the incident's cluster takes no node probe (its entry does not allow them), or ""."""
    clusters = ctx.services.core.clusters
    try:
        spec = clusters.spec_for(ctx.services.incidents.snapshot_target(incident))
    except ClusterError as error:
        return str(error)
    if spec.node_probes:
        return ""
    return (f"cluster {spec.name} does not allow node probes: the runner reaches this host's cluster, so a probe "
            f"runs only where the operator set `node_probes: true` in the cluster's entry.")


def _probe(ctx: CommandContext, *, incident: IncidentView, plan: stored_evidence.ProbePlan) -> None:
    """The opt-in `ibstat` on the implicated hosts the workload ran on (per the scheduler's record, never
    per a log line), only through an operator-configured runner, time-capped."""
    settings = ctx.services.settings
    if not ctx.services.core.policy.may_read_cluster(ctx.user_id):
        ctx.post_in_thread(incident, text=markup.format("No probe ran: {}", _refusal(ctx, what="run node probes")))
        return
    refused = _probes_refused_on(ctx, incident=incident)
    if refused:
        ctx.post_in_thread(incident, text=markup.format("No probe ran: {}", refused))
        return
    try:
        runner = node_probe.runner_for(settings=settings)
    except ValueError as error:
        runner, problem = None, str(error)
    else:
        problem = "" if runner else "no node probe runner is configured"
    if runner is None:
        ctx.post_in_thread(incident, text=markup.format(
            "No probe ran: {}. To allow it, the operator sets `TRIAGE_NODE_PROBE_RUNNER=srun` (Slurm) or "
            "`TRIAGE_NODE_PROBE_RUNNER=k8s-debug` with `TRIAGE_NODE_PROBE_IMAGE=<image with ibstat>` (Kubernetes) "
            "and restarts the bot; then `/triage fabric {} probe` reads `ibstat` on the implicated "
            "hosts, {:g} s cap each.", problem, incident.key, PROBE_CAP_SECONDS))
        return
    nodes = list(plan.nodes)
    if not nodes and plan.refused:
        ctx.post_in_thread(incident, text=markup.format(
            "No probe ran: the logs name {}, but the scheduler's record places this workload only on {}; "
            "the bot probes only nodes the workload ran on.",
            ", ".join(plan.refused), ", ".join(plan.ran_on) or "no node"))
        return
    if not nodes:
        ctx.post_in_thread(incident, text="No probe ran: the logs implicate no host to probe.")
        return
    lines: list[markup.Mrkdwn] = [
        markup.format("`{}`: not probed (not a node this workload ran on, per the scheduler)", host)
        for host in plan.refused
    ]
    for node in nodes:
        try:
            result = node_probe.run_on_node(runner=runner, node=node, command=["ibstat"], allow=True,
                                            time_cap_seconds=PROBE_CAP_SECONDS)
        except (node_probe.ProbeNotAllowed, ValueError) as error:
            lines.append(markup.format("`{}`: not probed ({})", node, str(error)))
            continue
        if not result.ok:
            lines.append(markup.format("`{}`: `{}` failed: {}", node, result.shown,
                                       blocks.clip(redact.redact_text(result.stderr.strip()), limit=300)))
            continue
        ports = node_probe.ib_link_observations(node=node, ports=node_probe.parse_ibstat(result.stdout),
                                                expected_rate_gbps=None, observed_at=utcnow())
        if ports:
            lines.extend(markup.format("`{}`", redact.redact_text(item.text)) for item in ports)
        else:
            lines.append(markup.format("`{}`: no HCA ports", node))
    text = markup.format("Probe (`ibstat`, {:g} s cap per node) on {}:\n{}", PROBE_CAP_SECONDS, ", ".join(nodes),
                         markup.lines(lines))
    ctx.post_in_thread(incident, text=blocks.clip(text, limit=3500))
    ctx.services.incidents.add_timeline_entry(
        incident_key=incident.key, actor=ctx.user_id, kind="fabric_probe", text=text[:4000], data={"nodes": nodes}
    )


SUBCOMMANDS = (
    Subcommand(
        name="compare",
        usage="compare [INC-n] <healthy-id>",
        summary="snapshot a healthy workload and post what differs from the incident's (ranked)",
        run=_run_compare,
        check=_check_compare,
        working_text=":hourglass_flowing_sand: Taking a bounded snapshot of the healthy workload to compare…",
    ),
    Subcommand(
        name="fabric",
        usage=f"fabric [INC-n] [{PROBE_WORD}]",
        summary="NCCL fabric scope (node-local, path-local, fabric-wide) from the latest snapshot; "
        f"`{PROBE_WORD}`: opt-in bounded ibstat via the configured runner",
        run=_run_fabric,
        check=_check_fabric,
    ),
)
