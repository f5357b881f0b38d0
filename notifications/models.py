"""A project's notification channels, every edit of them, what was routed to each, and every try to deliver it."""
from django.conf import settings
from django.db import models
from django.db.models import Q

from notifications.message import NotifyEvent


class ChannelKind(models.TextChoices):
    WEBHOOK = "webhook", "generic webhook (signed JSON)"
    SLACK = "slack", "Slack incoming webhook"
    ALERTMANAGER = "alertmanager", "Prometheus Alertmanager"
    EMAIL = "email", "email"
    MLFLOW = "mlflow", "MLflow run tags"


class Channel(models.Model):
    """Where a project's incidents go. The secret is write-only: the API and pages only say whether one is set."""

    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="channels")
    name = models.SlugField(max_length=100)
    kind = models.CharField(max_length=16, choices=ChannelKind.choices)
    url = models.CharField(max_length=500, blank=True)
    secret = models.CharField(max_length=500, blank=True)
    config = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="channel_unique_name")]

    def __str__(self):
        return f"{self.project}/{self.name}"

    @property
    def has_secret(self) -> bool:
        return bool(self.secret)


class ChannelAction(models.TextChoices):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


class ChannelChange(models.Model):
    """One row per create, edit or delete of a channel: who, when, which fields (a secret's value never)."""

    channel = models.ForeignKey(Channel, null=True, on_delete=models.SET_NULL, related_name="changes")
    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="+")
    channel_name = models.CharField(max_length=100)
    action = models.CharField(max_length=16, choices=ChannelAction.choices)
    fields = models.JSONField(default=list)  # the names of the fields set or changed
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    source = models.CharField(max_length=32)  # api, console
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class NotificationState(models.TextChoices):
    QUEUED = "queued"  # waiting for its next try (next_try_at)
    SENDING = "sending"  # claimed by a delivery task
    SENT = "sent"
    FAILED = "failed"  # refused (4xx) or out of tries
    HELD = "held"  # a mute covers the incident's origin: sent if the mute ends while it still fires
    RATE_LIMITED = "rate_limited"  # an update too soon after the last message of the incident to the channel


class Notification(models.Model):
    """One message of one incident to one channel. Unique per (incident, channel, event, key): routing twice sends once.

    `key` is "" for opened and resolved (once each per channel), the change's time for updates.
    """

    incident = models.ForeignKey("alerts.Incident", on_delete=models.CASCADE, related_name="+")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=16, choices=NotifyEvent.choices)
    key = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=NotificationState.choices)
    created_at = models.DateTimeField()
    tries = models.PositiveIntegerField(default=0)
    next_try_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)  # the last successful push (Alertmanager's refreshes move it)
    released_at = models.DateTimeField(null=True, blank=True)  # a held one, when its mute ended

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["incident", "channel", "event", "key"], name="notification_once")]
        indexes = [models.Index(fields=["state", "next_try_at"], name="notification_due")]


class DeliveryStatus(models.TextChoices):
    OK = "ok"
    RETRYING = "retrying"  # failed, tried again later
    FAILED = "failed"  # failed for good


class Delivery(models.Model):
    """One try to deliver a notification: the channel's delivery log."""

    notification = models.ForeignKey(Notification, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")  # none for a test message
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    attempt = models.PositiveIntegerField()
    at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    detail = models.CharField(max_length=300, blank=True)
    test = models.BooleanField(default=False)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["channel", "-at"], name="delivery_channel_at")]
        constraints = [models.CheckConstraint(condition=Q(attempt__gte=1), name="delivery_attempt_positive")]
