"""How channels are doing, as the console shows it: the last try, failures, and a test message sent on request."""
import time

from django.conf import settings
from django.db import transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.urls import reverse
from django.utils import timezone

from notifications import routing, senders
from notifications.message import IncidentMessage
from notifications.models import Channel, ChannelKind, Delivery, DeliveryStatus, Notification, NotificationState
from opsconsole.beat import periodic_work


def with_status(channels) -> list[Channel]:
    """Channels with `.status` set: the last try, failed and retrying counts (what pages and the API show).

    Three queries for any number of channels: counts grouped by channel, each channel's newest try's id, the tries.
    """
    channels = list(channels)
    ids = [c.pk for c in channels]
    counts = {row.pop("channel"): row for row in Notification.objects.filter(channel__in=ids).values("channel").annotate(
        failed=Count("pk", filter=Q(state=NotificationState.FAILED)),
        retrying=Count("pk", filter=Q(state=NotificationState.QUEUED, tries__gt=0)),
    ).order_by()}
    newest = Delivery.objects.filter(channel=OuterRef("pk")).order_by(*Delivery._meta.ordering).values("pk")[:1]
    last_of = dict(Channel.objects.filter(pk__in=ids).annotate(last=Subquery(newest)).values_list("pk", "last"))
    tries = Delivery.objects.select_related("notification").in_bulk([pk for pk in last_of.values() if pk is not None])
    for channel in channels:
        channel.status = {"last_delivery": tries.get(last_of.get(channel.pk)),
                          **counts.get(channel.pk, {"failed": 0, "retrying": 0})}
    return channels


def unrefreshed_pushes(channel: Channel) -> str:
    """Why an Alertmanager channel's pushes go stale, when they do ("" when they are refreshed).

    A push's endsAt lies NOTIFY_ALERTMANAGER_REFRESH_SECONDS × 3 ahead (senders/alertmanager.py); only the periodic
    notification sweep pushes a still-firing incident again before then. Without it the page says so rather than
    let the team's Alertmanager resolve incidents that still fire.
    """
    if channel.kind != ChannelKind.ALERTMANAGER:
        return ""
    work = periodic_work()
    if work.runs:
        return ""
    lifetime = 3 * settings.NOTIFY_ALERTMANAGER_REFRESH_SECONDS
    after = f"{lifetime // 60} minute{'s' if lifetime >= 120 else ''}" if lifetime % 60 == 0 else f"{lifetime} seconds"
    return (f"This console does not refresh its pushes: an incident still firing resolves in Alertmanager {after} "
            f"after it was pushed. Why: {work.reason}.")


def failed_notifications(project, since=None, until=None) -> list[dict]:
    """Per channel of the project, its notifications that failed for good (created in the period): the audit's figure."""
    rows = Notification.objects.filter(channel__project=project, state=NotificationState.FAILED)
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if until is not None:
        rows = rows.filter(created_at__lt=until)
    counted = rows.values("channel__name", "channel__kind").annotate(failed=Count("pk")).order_by("channel__name")
    return [{"channel": r["channel__name"], "kind": r["channel__kind"], "failed": r["failed"]} for r in counted]


def test_message(channel: Channel, now) -> IncidentMessage:
    project = channel.project
    page = settings.CONSOLE_URL + reverse("console:channel", args=[channel.pk])
    return IncidentMessage(
        event="test", incident_id=0, project=project.slug, run_id="warning-light-test", run_pk=0, run_tags={},
        rule="test-message", rule_kind="test", severity="notify", component="", metric="", step=0, magnitude=None,
        magnitude_unit="", owner="Warning Light", runbook_url=page, run_url=page, incident_url=page,
        alerts=0, opened_at=now, resolved_at=now, summary=f"A test message from Warning Light to channel {channel.name}",
        labels={"run": "warning-light-test", "rule": "test-message", "severity": "notify", "project": project.slug,
                "incident": "test"},
    )


class ChannelGone(Exception):
    """The channel was deleted while its test message was on its way: there is no log left to write the try to."""


def send_test(channel: Channel, user=None) -> Delivery:
    """Send a test message now (not queued: whoever asked waits for the answer) and log the try.

    The send takes up to a timeout, time enough for someone to delete the channel: the try is logged under the
    channel's row lock (delete_channel takes it too), only if the channel is still there; ChannelGone otherwise.
    """
    now = timezone.now()
    started = time.monotonic()
    outcome = senders.send(routing.target_of(channel), test_message(channel, now))
    with transaction.atomic():
        if not Channel.objects.select_for_update().filter(pk=channel.pk).exists():
            raise ChannelGone(channel.pk)
        return Delivery.objects.create(
            notification=None, channel=channel, attempt=1, at=timezone.now(), test=True,
            duration_ms=int((time.monotonic() - started) * 1000), status_code=outcome.status_code,
            status=DeliveryStatus.OK if outcome.ok else DeliveryStatus.FAILED, detail=outcome.detail,
        )
