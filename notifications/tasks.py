"""Delivering notifications: one Celery task per delivery, a delivery-log row per try, retries with back-off.

A try is claimed with a conditional update (queued and due -> sending), so a task queued twice, or the sweep and
a retry at once, sends once. Retries (5xx, 429, timeouts, unreachable) wait NOTIFY_RETRY_SECONDS, doubling each
time, up to NOTIFY_MAX_TRIES tries; any other answer fails at once. With a worker a retry is queued with a
countdown; in eager mode (the embedded console, no worker) a try runs inline once and its retries are left to
the sweep, so a failing receiver costs ingest at most one timeout, never a back-off slept in the request.

The sweep (beat, NOTIFY_SWEEP_SECONDS) queues every notification whose try is due (retries, and any whose
queueing was lost to a broker outage), puts claims a killed worker left back in the queue, and pushes firing
incidents to Alertmanagers again before their `endsAt`, as Prometheus re-sends its firing alerts.
"""
import logging
import time
from datetime import timedelta
from functools import partial

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError

from alerts.models import IncidentState
from alerts.tasks import BROKER
from notifications import routing, senders
from notifications.message import DeliveryOutcome, NotifyEvent
from notifications.models import ChannelKind, Delivery, DeliveryStatus, Notification, NotificationState

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 3600
SWEEP_LIMIT = 500
BROKER_ERRORS = (OperationalError, OSError, ConnectionError)


@shared_task(acks_late=True)
def deliver(notification_id):
    return deliver_now(notification_id)


@shared_task(acks_late=True)
def refresh(notification_id):
    return refresh_now(notification_id)


@shared_task
def sweep():
    return sweep_now()


def queue_delivery(notification_id, countdown=None) -> bool:
    """Hand a try to a worker (inline in eager mode); False when it is left to the sweep."""
    if deliver.app.conf.task_always_eager:
        if countdown:
            return False  # no worker to wait in: the sweep tries it when it is due
        deliver_now(notification_id)
        return True

    def send():
        deliver.apply_async((notification_id,), countdown=countdown, retry=False)
        return True

    queued = BROKER.call(send, errors=BROKER_ERRORS, fallback=False)
    if not queued:
        log.info("notification %s is left to the sweep: the task queue is unreachable", notification_id)
    return queued


def _claim(notification_id, now) -> Notification | None:
    claimed = Notification.objects.filter(
        Q(next_try_at__isnull=True) | Q(next_try_at__lte=now),
        pk=notification_id, state=NotificationState.QUEUED, channel__enabled=True,
    ).update(state=NotificationState.SENDING, claimed_at=now, tries=F("tries") + 1)
    if not claimed:
        return None
    return Notification.objects.select_related("channel", "incident__run__project", "incident__origin__rule").get(pk=notification_id)


def _send(channel, incident, event) -> tuple[DeliveryOutcome, int]:
    started = time.monotonic()
    try:
        outcome = senders.send(routing.target_of(channel), routing.message_for(incident, event))
    except Exception as exc:  # the message could not be built (the incident lost its origin)
        outcome = DeliveryOutcome(ok=False, detail=senders.short(f"{type(exc).__name__}: {exc}"))
    return outcome, int((time.monotonic() - started) * 1000)


def backoff(tries: int) -> int:
    return min(MAX_BACKOFF_SECONDS, settings.NOTIFY_RETRY_SECONDS * 2 ** max(0, tries - 1))


def deliver_now(notification_id) -> bool:
    """One try of one notification, if it is queued and due: True when it was sent."""
    now = timezone.now()
    notification = _claim(notification_id, now)
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
    return outcome.ok


def _firing_pushes(pushed_before):
    """Incidents still firing that an Alertmanager was last pushed before `pushed_before`: due a refresh."""
    return Notification.objects.filter(
        state=NotificationState.SENT, event=NotifyEvent.OPENED, sent_at__lte=pushed_before,
        channel__kind=ChannelKind.ALERTMANAGER, channel__enabled=True,
    ).exclude(incident__state=IncidentState.RESOLVED)


def sweep_now(now=None) -> dict:
    now = now or timezone.now()
    stuck_before = now - timedelta(seconds=settings.NOTIFY_TIMEOUT_SECONDS + 60)
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
        elif not BROKER.call(partial(refresh.apply_async, (pk,), retry=False), errors=BROKER_ERRORS, fallback=False):
            break
        refreshing += 1
    return {"reclaimed": reclaimed, "queued": queued, "refreshed": refreshing}
