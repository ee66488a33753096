"""Alertmanager notifications become incidents in Slack: the worker behind `POST /alerts/alertmanager`.

One worker thread takes notifications from the bounded queue in arrival order, lets the core record them and
open or link incidents (bot.alerts.intake), then posts: a new incident's root message (naming the alert) and
its first snapshot, taken as the bot's own identity exactly as `/triage job` takes one (same rulebook, same
`snapshot_and_post`); one thread reply per notification for alerts linked to an open incident; resolved
alerts, and a suggestion to resolve once every alert of the incident has resolved. Snapshots run on a small
pool so the next root message never waits behind them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

from bot import markup
from bot.alerts import intake as alert_intake
from bot.alerts.routing import load_rules
from bot.alerts.subjects import PodRef, Subject, workload_target
from bot.evidence.targets import InvalidTarget
from bot.incidents.policy import BOT_ACTOR
from bot.incidents.service import IncidentView
from handlers.ops import logs
from handlers.ops.alert_http import AlertMetrics, AlertQueue, Queued, check_token, make_alerts_app
from handlers.slack import replies
from handlers.slack.blocks import alerts as alert_blocks
from handlers.slack.blocks import common as blocks
from handlers.slack.router import CommandContext, slack_error_code
from handlers.slack.services import Services
from storage import db

log = logging.getLogger(__name__)

ROOT_POST_FAILED = "root_post_failed"
SNAPSHOT_WORKERS = 2
OWNER_CACHE = 4096
DATABASE_ATTEMPTS = 3


@dataclasses.dataclass(kw_only=True)
class AlertRuntime:
    """The queue, the core intake, the worker and the WSGI endpoint of one bot."""

    services: Services
    client: WebClient
    queue: AlertQueue
    intake: alert_intake.AlertIntake
    metrics: AlertMetrics
    wsgi: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]] | None = None
    _worker: threading.Thread | None = None
    _stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _snapshots: concurrent.futures.ThreadPoolExecutor = dataclasses.field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(max_workers=SNAPSHOT_WORKERS,
                                                                      thread_name_prefix="alert-snapshot"))

    def status(self) -> dict[str, Any]:
        """What /readyz shows about the intake (it never gates readiness: Slack shares the pod)."""
        return {"alerts": self.queue.status()}

    def start(self) -> None:
        """Start the worker once (the first accepted notification does it)."""
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._run, name="alert-intake", daemon=True)
                self._worker.start()

    def close(self) -> None:
        """Stop taking notifications; snapshots already running finish on their own threads."""
        self._stop.set()
        if self._worker is not None:
            self._worker.join(timeout=5)
        self._snapshots.shutdown(wait=False)

    # --- the worker --------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            item = self.queue.take(timeout=0.5)
            if item is None:
                continue
            try:
                self._handle_retrying(item)
            except Exception:
                log.exception("alert notification failed")
            finally:
                self.queue.done()
                self.services.work.end()

    def _handle_retrying(self, item: Queued) -> None:
        """The database blinking must not lose an accepted notification: retry it (processing is idempotent)."""
        for attempt in range(DATABASE_ATTEMPTS):
            try:
                self.handle(item)
                return
            except db.DatabaseUnavailable:
                if attempt == DATABASE_ATTEMPTS - 1 or self._stop.wait(2.0 * (attempt + 1)):
                    raise

    def handle(self, item: Queued) -> alert_intake.IntakeResult:
        """Process one notification and post what it did."""
        result = self.intake.process(item.notification)
        log.info("alert notification processed", extra={"receiver": item.notification.receiver,
                                                         **alert_intake.describe(result)})
        self._count(result, item=item)
        for opened in result.opened:
            self._post_opened(opened.incident, alerts=opened.alerts, opened=opened, received_at=item.received_at)
        for linked in result.linked:
            self._post_linked(linked, received_at=item.received_at, external_url=item.notification.externalURL)
        for resolved in result.resolved:
            self._post_resolved(resolved)
        return result

    def _count(self, result: alert_intake.IntakeResult, *, item: Queued) -> None:
        resolved = sum(1 for alert in item.notification.alerts if alert.status == "resolved")
        for action, count in (("opened", sum(len(o.alerts) for o in result.opened)),
                              ("linked", sum(len(link.alerts) for link in result.linked)),
                              ("recorded", result.recorded), ("unmapped", result.unmapped), ("held", result.held),
                              ("repeated", result.repeated), ("resolved", resolved)):
            if count:
                self.metrics.alerts.labels(action=action).inc(count)
        if result.opened:
            self.metrics.incidents.labels(result="opened").inc(len(result.opened))
        if result.linked:
            self.metrics.incidents.labels(result="linked").inc(len(result.linked))

    def _context(self, incident: IncidentView) -> CommandContext:
        """The context `/triage` subcommands get, acting as the bot itself."""
        return CommandContext(services=self.services, client=self.client, user_id=BOT_ACTOR,
                              channel_id=incident.channel_id, name="alert", rest="")

    def _post_opened(self, incident: IncidentView, *, alerts: tuple[alert_intake.AlertView, ...],
                     opened: alert_intake.Opened | None, received_at: float) -> None:
        """Root message naming the alert, the alert's details in the thread, then the snapshot."""
        logs.bind_incident(incident.key)
        incidents = self.services.incidents
        try:
            ts = replies.post_message(self.client, channel=incident.channel_id,
                                      text=markup.format("{} · alert {}", blocks.incident_root_text(incident=incident),
                                                         alert_blocks.plain(alerts[0].name)),
                                      blocks_=blocks.incident_root(incident=incident))
        except (SlackClientError, OSError) as error:
            incidents.add_timeline_entry(incident_key=incident.key, actor=BOT_ACTOR, kind=ROOT_POST_FAILED,
                                         text=f"Slack did not take the root message: {slack_error_code(error)}")
            log.warning("alert root message for %s failed: %s", incident.key, slack_error_code(error))
            return
        self.metrics.root_seconds.observe(time.monotonic() - received_at)
        incident = incidents.attach_root_message(incident_key=incident.key, channel_id=incident.channel_id, ts=ts)
        external_url = opened.external_url if opened else ""
        source = markup.format(" (receiver `{}`, rule `{}`)", opened.receiver, opened.rule) if opened else ""
        self._safely(incident, text=markup.format(
                         "{} opened from Alertmanager{}. Nobody holds command yet: take it with `/triage assign @you "
                         "commander`. Taking a bounded snapshot of `{}` as triage-bot…", incident.key, source,
                         incident.target),
                     blocks_=alert_blocks.alert_details(alerts=alerts, external_url=external_url,
                                                        gpu=opened.gpu if opened else {}))
        self.services.work.begin()
        self._snapshots.submit(self._snapshot, incident)

    def _snapshot(self, incident: IncidentView) -> None:
        from handlers.slack.commands import incident as incident_commands

        try:
            ctx = self._context(incident)
            incident_commands.snapshot_and_post(ctx, incident)
            incident_commands.start_reminders(ctx, incident)
        except Exception:
            log.exception("alert snapshot of %s failed", incident.key)
        finally:
            self.services.work.end()

    def _post_linked(self, linked: alert_intake.Linked, *, received_at: float, external_url: str) -> None:
        incident = linked.incident
        if incident.thread_ts is None:
            timeline = self.services.incidents.timeline(incident.key)
            if any(item.kind == ROOT_POST_FAILED for item in timeline[-5:]):
                self._post_opened(incident, alerts=linked.alerts, opened=None, received_at=received_at)
            return  # being opened right now by someone else: the timeline already holds the link
        self._safely(incident, text=markup.format(":rotating_light: {} firing alert(s) linked to {}: {}",
                                                  len(linked.alerts), incident.key, alert_blocks.names(linked.alerts)),
                     blocks_=alert_blocks.linked(alerts=linked.alerts, incident_key=incident.key,
                                                 external_url=external_url))

    def _post_resolved(self, resolved: alert_intake.Resolved) -> None:
        incident = resolved.incident
        if incident.thread_ts is None:
            return
        self._safely(incident, text=markup.format(":white_check_mark: Resolved: {}", alert_blocks.names(resolved.alerts)))
        if resolved.all_resolved:
            self._safely(incident, text=markup.format("Every alert of {} has resolved ({}).", incident.key, resolved.total),
                         blocks_=alert_blocks.suggest_resolving(incident_key=incident.key, total=resolved.total))

    def _safely(self, incident: IncidentView, *, text: str, blocks_: list[dict[str, Any]] | None = None) -> None:
        """A thread reply; Slack failing is logged (the timeline already holds the fact)."""
        try:
            replies.post(self.client, incident, text=text, blocks_=blocks_)
        except (SlackClientError, OSError) as error:
            log.warning("alert reply for %s failed: %s", incident.key, slack_error_code(error))


def _pod_resolver(services: Services) -> Callable[[PodRef], Subject]:
    """Read a pod's owner once per pod (bounded cache), as the bot, with the bot's cluster settings."""
    cache: OrderedDict[tuple[str, str], Subject] = OrderedDict()
    lock = threading.Lock()

    def resolve(ref: PodRef) -> Subject:
        from bot.diagnosis.collectors.kube.owners import OwnerUnknown, owner_of_pod

        key = (ref.namespace, ref.pod)
        with lock:
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
        services.core.policy.require_cluster_read(actor=BOT_ACTOR)
        try:
            kind, name = owner_of_pod(namespace=ref.namespace, pod=ref.pod, settings=services.settings)
            subject = Subject(target=workload_target(namespace=ref.namespace, kind=kind, name=name))
        except OwnerUnknown as error:
            return Subject(reason=str(error))  # not cached: the next notification may find the cluster back
        except InvalidTarget as error:
            subject = Subject(reason=f"pod {ref.namespace}/{ref.pod}'s owner is not a valid workload: {error}"[:300])
        with lock:
            cache[key] = subject
            while len(cache) > OWNER_CACHE:
                cache.popitem(last=False)
        return subject

    return resolve


def build(*, services: Services, client: WebClient) -> AlertRuntime | None:
    """The intake when TRIAGE_ALERTS_TOKEN is set; raises ValueError (RulesError) on a bad token or rules file."""
    settings = services.settings
    if not settings.alerts_token:
        return None
    token = check_token(settings.alerts_token)
    rules = load_rules(settings.alerts_rules_path)
    core = services.core
    alert_queue = AlertQueue(capacity=settings.alerts_queue_size)
    runtime = AlertRuntime(
        services=services, client=client, queue=alert_queue,
        intake=alert_intake.AlertIntake(engine=core.engine, incidents=core.incidents, rules=rules,
                                        resolve_pod=_pod_resolver(services), clock=core.clock),
        metrics=AlertMetrics(registry=services.metrics.registry, depth=alert_queue.depth))

    def begin() -> None:
        runtime.start()
        services.work.begin()

    runtime.wsgi = make_alerts_app(token=token, alert_queue=alert_queue, max_body_bytes=settings.alerts_max_body_bytes,
                                   metrics=runtime.metrics, work_begin=begin, work_end=services.work.end)
    return runtime
