"""Delivering notifications: one Celery task per delivery, a delivery-log row per try, retries with back-off.

A try is claimed with a conditional update (queued and due -> sending), so a task queued twice, or the sweep and
a retry at once, sends once. Retries (5xx, 429, timeouts, unreachable) wait NOTIFY_RETRY_SECONDS, doubling each
time, up to NOTIFY_MAX_TRIES tries; any other answer fails at once. With a worker a retry is queued with a
countdown; in eager mode (the embedded console, no worker) a try runs inline once and its retries are left to
the sweep, so a failing receiver costs ingest at most one timeout, never a back-off slept in the request.

Deliveries and refreshes run on the `notifications` queue (CELERY_TASK_ROUTES), on worker processes of their own:
evaluation never waits behind a slow receiver. At most NOTIFY_MAX_INFLIGHT_PER_PROJECT tries of one project are in
flight at once; a try beyond it is queued again a few seconds later, so one project's slow receivers never take
every delivery process.

One message, one delivery: a try is bounded three times over, from the inside out: the sender's own deadline
(NOTIFY_TIMEOUT_SECONDS), the task's soft time limit a little later (the try is recorded as timed out and retried),
and its hard limit, at which the worker kills the process running it. The sweep takes a claim back only when it is
older than the hard limit plus a margin, when no try of it can still be running; and a try's final update is
conditional on its own claim, so a try that lost its claim never overwrites the one that took it over.

The sweep (beat, NOTIFY_SWEEP_SECONDS) queues every notification whose try is due (retries, and any whose
queueing was lost to a broker outage), puts claims a killed worker left back in the queue, and pushes firing
incidents to Alertmanagers again before their `endsAt`, as Prometheus re-sends its firing alerts.
"""
import logging
import time
from datetime import timedelta
from functools import partial

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError

from alerts.models import IncidentState, PermittedResponse
from alerts.tasks import BROKER
from ingest.models import Project
from notifications import routing, senders
from notifications.message import DeliveryOutcome, NotifyEvent
from notifications.models import Channel, ChannelKind, Delivery, DeliveryStatus, Notification, NotificationState
from opsconsole import metrics
from opsconsole.beat import note_sweep

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 3600
SWEEP_LIMIT = 500
BROKER_ERRORS = (OperationalError, OSError, ConnectionError)
# Past the sender's deadline: the soft limit leaves time to record the try, the hard one to be killed cleanly.
SOFT_LIMIT_SLACK_SECONDS = 5
HARD_LIMIT_SLACK_SECONDS = 10
# Between a try's hard limit and the sweep taking its claim back: hosts' clocks apart (claimed_at is the
# worker's time, the cut-off the sweep's), a worker slow to kill a process.
RECLAIM_MARGIN_SECONDS = 30
# A try refused by its project's in-flight bound asks again after this long.
INFLIGHT_RECHECK_SECONDS = 2


def soft_time_limit() -> int:
    return settings.NOTIFY_TIMEOUT_SECONDS + SOFT_LIMIT_SLACK_SECONDS


def time_limit() -> int:
    return settings.NOTIFY_TIMEOUT_SECONDS + HARD_LIMIT_SLACK_SECONDS


def reclaim_after() -> int:
    """Seconds after which a claim can only be a dead try's: no process can still be running it."""
    return time_limit() + RECLAIM_MARGIN_SECONDS


# The limits are enforced by a prefork worker (the default pool; the solo and threads pools enforce none). Each
# message carries the limits of the process that queued it (limits(), which wins over these defaults), the settings
# the sweep's reclaim_after() is computed from as well.
@shared_task(acks_late=True, soft_time_limit=soft_time_limit(), time_limit=time_limit())
def deliver(notification_id):
    return deliver_now(notification_id)


@shared_task(acks_late=True, soft_time_limit=soft_time_limit(), time_limit=time_limit())
def refresh(notification_id):
    return refresh_now(notification_id)


@shared_task
def sweep():
    return sweep_now()


def limits() -> dict:
    return {"soft_time_limit": soft_time_limit(), "time_limit": time_limit()}


def queue_delivery(notification_id, countdown=None) -> bool:
    """Hand a try to a worker (inline in eager mode); False when it is left to the sweep."""
    if deliver.app.conf.task_always_eager:
        if countdown:
            return False  # no worker to wait in: the sweep tries it when it is due
        deliver_now(notification_id)
        return True

    def send():
        deliver.apply_async((notification_id,), countdown=countdown, retry=False, **limits())
        return True

    queued = BROKER.call(send, errors=BROKER_ERRORS, fallback=False)
    if not queued:
        log.info("notification %s is left to the sweep: the task queue is unreachable", notification_id)
    return queued


BUSY = "busy"  # the claim's answer when the project has its most tries in flight


def in_flight(project_id, now) -> int:
    """Tries of a project's messages running now (claims older than reclaim_after() are dead tries': not counted)."""
    return Notification.objects.filter(channel__project_id=project_id, state=NotificationState.SENDING,
                                       claimed_at__gte=now - timedelta(seconds=reclaim_after())).count()


def _claim(notification_id, now):
    """The notification claimed for one try; None when it is not due (or sent, or claimed by another); BUSY when its
    project already has NOTIFY_MAX_INFLIGHT_PER_PROJECT tries in flight."""
    project_id = Channel.objects.filter(notifications__pk=notification_id).values_list("project_id", flat=True).first()
    if project_id is None:
        return None
    claimable = Notification.objects.filter(
        Q(next_try_at__isnull=True) | Q(next_try_at__lte=now),
        pk=notification_id, state=NotificationState.QUEUED, channel__enabled=True,
    )
    with transaction.atomic():
        # A project's claims are taken one at a time (its row locked; NO KEY, so rows pointing at the project are
        # still written meanwhile): two workers never both see room for one more try.
        list(Project.objects.select_for_update(no_key=True).filter(pk=project_id).values_list("pk", flat=True))
        if not claimable.exists():
            return None
        if in_flight(project_id, now) >= settings.NOTIFY_MAX_INFLIGHT_PER_PROJECT:
            return BUSY
        claimed = claimable.update(state=NotificationState.SENDING, claimed_at=now, tries=F("tries") + 1)
    if not claimed:
        return None
    return Notification.objects.select_related("channel", "incident__run__project", "incident__origin__rule").get(pk=notification_id)


def _send(channel, incident, event) -> tuple[DeliveryOutcome, int]:
    started = time.monotonic()
    try:
        outcome = senders.send(routing.target_of(channel), routing.message_for(incident, event))
    except SoftTimeLimitExceeded:
        outcome = _ended()
    except Exception as exc:  # the message could not be built (the incident lost its origin)
        outcome = DeliveryOutcome(ok=False, detail=senders.short(f"{type(exc).__name__}: {exc}"))
    elapsed = time.monotonic() - started
    if not outcome.ok and elapsed >= settings.NOTIFY_TIMEOUT_SECONDS + SOFT_LIMIT_SLACK_SECONDS / 2:
        # Well past the sender's deadline, whatever ended it (the task's soft limit, which a sender catches as any
        # other error): a timeout, retried.
        outcome = _ended()
    return outcome, int(elapsed * 1000)


def _ended() -> DeliveryOutcome:
    return DeliveryOutcome(ok=False, retry=True,
                           detail=f"no answer within {settings.NOTIFY_TIMEOUT_SECONDS} s: the try was ended")


def backoff(tries: int) -> int:
    return min(MAX_BACKOFF_SECONDS, settings.NOTIFY_RETRY_SECONDS * 2 ** max(0, tries - 1))


def deliver_now(notification_id) -> bool:
    """One try of one notification, if it is queued and due: True when it was sent."""
    now = timezone.now()
    notification = _claim(notification_id, now)
    if notification is BUSY:
        # Its project's other tries hold the room: asked again shortly (in eager mode, by the sweep).
        queue_delivery(notification_id, countdown=INFLIGHT_RECHECK_SECONDS)
        return False
    if notification is None:
        return False
    outcome, duration = _send(notification.channel, notification.incident, notification.event)
    retry_in = None
    if outcome.ok:
        status, state = DeliveryStatus.OK, NotificationState.SENT
    elif outcome.retry and notification.tries < settings.NOTIFY_MAX_TRIES:
        status, state, retry_in = DeliveryStatus.RETRYING, NotificationState.QUEUED, backoff(notification.tries)
    else:
        status, state = DeliveryStatus.FAILED, NotificationState.FAILED
    done = timezone.now()
    with transaction.atomic():
        Delivery.objects.create(notification=notification, channel=notification.channel, attempt=notification.tries,
                                at=done, duration_ms=duration, status=status, status_code=outcome.status_code,
                                detail=outcome.detail)
        # This try's own claim only: if the sweep took back a try that ran too long and another worker claimed it,
        # that worker's answer is the one to keep.
        Notification.objects.filter(pk=notification.pk, state=NotificationState.SENDING, tries=notification.tries).update(
            state=state, claimed_at=None, sent_at=done if outcome.ok else None,
            next_try_at=done + timedelta(seconds=retry_in) if retry_in is not None else None)
    _counted(notification.channel, status)
    if retry_in is not None:
        queue_delivery(notification.pk, countdown=retry_in)
    elif outcome.ok and notification.event == NotifyEvent.OPENED:
        # The incident may have ended while this was on its way: its resolution goes out now.
        for pk in routing.route(notification.incident_id, now=done):
            queue_delivery(pk)
    return outcome.ok


def refresh_now(notification_id) -> bool:
    """Push a firing incident to an Alertmanager again, before the `endsAt` of the last push passes."""
    now = timezone.now()
    due = now - timedelta(seconds=settings.NOTIFY_ALERTMANAGER_REFRESH_SECONDS)
    claimed = _firing_pushes(due).filter(pk=notification_id).update(sent_at=now)
    if not claimed:
        return False
    notification = Notification.objects.select_related("channel", "incident__run__project", "incident__origin__rule").get(pk=notification_id)
    if routing.held(notification.incident):
        return False  # muted since it was pushed: left to expire at its endsAt rather than renewed
    outcome, duration = _send(notification.channel, notification.incident, notification.event)
    # A failed refresh is not retried on its own: the next sweep pushes again, as it does every interval.
    Delivery.objects.create(notification=notification, channel=notification.channel, attempt=notification.tries,
                            at=timezone.now(), duration_ms=duration, status_code=outcome.status_code,
                            status=DeliveryStatus.OK if outcome.ok else DeliveryStatus.FAILED,
                            detail=senders.short("refresh" + (f": {outcome.detail}" if outcome.detail else "")))
    _counted(notification.channel, DeliveryStatus.OK if outcome.ok else DeliveryStatus.FAILED)
    return outcome.ok


def _counted(channel, status):
    metrics.count("notification_deliveries", status=str(status), kind=str(channel.kind),
                  project=channel.project if metrics.with_projects() else None)


def _firing_pushes(pushed_before):
    """Incidents still firing that an Alertmanager was last pushed before `pushed_before`: due a refresh."""
    return Notification.objects.filter(
        state=NotificationState.SENT, event=NotifyEvent.OPENED, sent_at__lte=pushed_before,
        channel__kind=ChannelKind.ALERTMANAGER, channel__enabled=True,
    ).exclude(incident__state=IncidentState.RESOLVED)


def sweep_now(now=None) -> dict:
    now = now or timezone.now()
    # Only a claim no try can still hold: a try still inside its limits would otherwise be sent twice.
    stuck_before = now - timedelta(seconds=reclaim_after())
    reclaimed = Notification.objects.filter(state=NotificationState.SENDING, claimed_at__lt=stuck_before).update(
        state=NotificationState.QUEUED, claimed_at=None, next_try_at=now)
    due = list(Notification.objects.filter(Q(next_try_at__isnull=True) | Q(next_try_at__lte=now),
                                           state=NotificationState.QUEUED, channel__enabled=True)
               .order_by("next_try_at", "id").values_list("pk", flat=True)[:SWEEP_LIMIT])
    queued = 0
    for pk in due:
        if not queue_delivery(pk):
            break  # the broker went away: the next sweep takes the rest
        queued += 1
    stale = now - timedelta(seconds=settings.NOTIFY_ALERTMANAGER_REFRESH_SECONDS)
    refreshing = 0
    for pk in _firing_pushes(stale).values_list("pk", flat=True)[:SWEEP_LIMIT]:
        if refresh.app.conf.task_always_eager:
            refresh_now(pk)
        elif not BROKER.call(partial(refresh.apply_async, (pk,), retry=False, **limits()), errors=BROKER_ERRORS, fallback=False):
            break
        refreshing += 1
    note_sweep()
    return {"reclaimed": reclaimed, "queued": queued, "refreshed": refreshing}


# --- what evaluation announces -----------------------------------------------------------------------------

def incident_changed(sender, incident, kinds, now, **kwargs):
    """alerts.signals.incident_changed: one query in evaluation's transaction, the routing after it commits."""
    try:
        if incident.severity == PermittedResponse.OBSERVE:
            return
        if not _has_channels(incident.run):
            return
    except Exception:  # never into evaluation
        log.exception("notifications: could not check incident %s for channels", incident.pk)
        return
    transaction.on_commit(partial(_route_committed, incident.pk, [str(k) for k in kinds], now))


def _has_channels(run) -> bool:
    """Whether the run's project has an enabled channel, asked once for each Run instance: the incidents one
    evaluation opens or changes share its run's, so a batch that opens a dozen asks once."""
    known = run.__dict__.get("_has_enabled_channels")
    if known is None:
        known = run.__dict__["_has_enabled_channels"] = Channel.objects.filter(project_id=run.project_id, enabled=True).exists()
    return known


def _route_committed(incident_id, kinds, now):
    try:
        for notification_id in routing.route(incident_id, kinds, now):
            queue_delivery(notification_id)
    except Exception:
        log.exception("notifications: routing incident %s failed", incident_id)
