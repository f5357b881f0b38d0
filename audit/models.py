"""The audit app's rows: each check of a rule's diagnostic link, and each weekly report as it was sent."""
from django.db import models


class LinkCheck(models.Model):
    """One answer (or failure to answer) of a rule's diagnostic link; the report shows the latest."""

    rule = models.ForeignKey("alerts.Rule", on_delete=models.CASCADE, related_name="link_checks")
    url = models.CharField(max_length=500)
    ok = models.BooleanField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    checked_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["rule", "-checked_at"])]


class SentReport(models.Model):
    """A weekly rule report as it went out: kept so the console shows what each owner was told."""

    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="sent_reports")
    owner = models.CharField(max_length=300)
    since = models.DateTimeField()
    until = models.DateTimeField()
    recipients = models.JSONField(default=list)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    report = models.JSONField()
    sent_at = models.DateTimeField()

    class Meta:
        ordering = ["-sent_at", "-pk"]
