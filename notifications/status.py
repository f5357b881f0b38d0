"""How channels are doing, as the console shows it: the last try, failures, and a test message sent on request."""
import time

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from notifications import routing, senders
from notifications.message import IncidentMessage
from notifications.models import Channel, Delivery, DeliveryStatus, Notification, NotificationState


def channel_status(channel: Channel) -> dict:
    counts = Notification.objects.filter(channel=channel).aggregate(
        failed=Count("pk", filter=Q(state=NotificationState.FAILED)),
        retrying=Count("pk", filter=Q(state=NotificationState.QUEUED, tries__gt=0)),
    )
    return {"last_delivery": Delivery.objects.filter(channel=channel).select_related("notification").first(), **counts}


def with_status(channels) -> list[Channel]:
    """Channels with `.status` set (what the pages list)."""
    channels = list(channels)
    for channel in channels:
        channel.status = channel_status(channel)
    return channels


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
    return IncidentMessage(
        event="test", incident_id=0, project=project.slug, run_id="warning-light-test", run_pk=0, run_tags={},
        rule="test-message", rule_kind="test", severity="notify", component="", metric="", step=0, magnitude=None,
        magnitude_unit="", owner="Warning Light", runbook_url=f"{settings.CONSOLE_URL}/channels/{channel.pk}/",
        run_url=f"{settings.CONSOLE_URL}/channels/{channel.pk}/", incident_url=f"{settings.CONSOLE_URL}/channels/{channel.pk}/",
        alerts=0, opened_at=now, resolved_at=now, summary=f"A test message from Warning Light to channel {channel.name}",
        labels={"run": "warning-light-test", "rule": "test-message", "severity": "notify", "project": project.slug,
                "incident": "test"},
    )


def send_test(channel: Channel, user=None) -> Delivery:
    """Send a test message now (not queued: whoever asked waits for the answer) and log the try."""
    now = timezone.now()
    started = time.monotonic()
    outcome = senders.send(routing.target_of(channel), test_message(channel, now))
    return Delivery.objects.create(
        notification=None, channel=channel, attempt=1, at=timezone.now(), test=True,
        duration_ms=int((time.monotonic() - started) * 1000), status_code=outcome.status_code,
        status=DeliveryStatus.OK if outcome.ok else DeliveryStatus.FAILED, detail=outcome.detail,
    )
