"""How long a project keeps each kind of data, and what was archived instead of deleted.

Every keep is in days and null means forever (the default for each: nothing is pruned until a rule admin
or an operator sets a policy). Raw points go first; the rollups the charts read at wide zoom can be kept
longer; alerts, incidents and reviews longer still. The decision log has no keep: it is append-only below
the application (reviews/migrations/0002), and what it names is archived rather than deleted (retention/purge.py).
"""
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class RetentionPolicy(models.Model):
    project = models.OneToOneField("ingest.Project", on_delete=models.CASCADE, related_name="retention")
    retention_days = models.PositiveIntegerField(null=True, blank=True, help_text="raw points, by the day their batch arrived; empty keeps them forever")
    rollup_retention_days = models.PositiveIntegerField(null=True, blank=True, help_text="the charts' 128-step rollups, by the run's last point; empty keeps them forever")
    alert_retention_days = models.PositiveIntegerField(null=True, blank=True, help_text="resolved alerts, by when they resolved; empty keeps them forever")
    incident_retention_days = models.PositiveIntegerField(null=True, blank=True, help_text="resolved incidents, by when they resolved; empty keeps them forever")
    review_retention_days = models.PositiveIntegerField(null=True, blank=True, help_text="reviews no decision names (never decided), by when they opened; empty keeps them forever")
    # How far pruning has got (the cutoff of its last pass), so a pass reads only what aged since the last one.
    points_pruned_before = models.DateTimeField(null=True, blank=True, editable=False)
    rollups_pruned_before = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name_plural = "retention policies"

    def __str__(self):
        return f"retention of {self.project}"

    def clean(self):
        if self.retention_days == 0:
            raise ValidationError({"retention_days": "at least one day (leave it empty to keep points forever)"})
        # The charts read rollups at wide zoom: they must not go while the raw points they summarise stay.
        if self.rollup_retention_days is not None and (self.retention_days is None or self.rollup_retention_days < self.retention_days):
            raise ValidationError({"rollup_retention_days": "keep rollups at least as long as the raw points (and give the raw points a keep)"})
        # An alert, incident or review must not go while the points it was about are still shown.
        for name in ("alert_retention_days", "incident_retention_days", "review_retention_days"):
            days = getattr(self, name)
            if days is not None and (self.retention_days is None or days < self.retention_days):
                raise ValidationError({name: "keep this at least as long as the raw points (and give the raw points a keep)"})


class ArchiveReason(models.TextChoices):
    RETENTION = "retention"  # its points aged out of the project's retention
    DELETED = "deleted"  # someone deleted it, but the decision log names it


class RunArchive(models.Model):
    """A run whose points are gone but whose identity, alerts, incidents, reviews and log entries stay."""

    run = models.OneToOneField("ingest.Run", on_delete=models.CASCADE, related_name="archive")
    archived_at = models.DateTimeField()
    reason = models.CharField(max_length=16, choices=ArchiveReason.choices)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    def __str__(self):
        return f"{self.run} archived {self.archived_at:%Y-%m-%d}"

    @property
    def words(self) -> str:
        """What the run page says: "Archived on 2026-03-01: its points were deleted by retention"."""
        who = "retention" if self.reason == ArchiveReason.RETENTION else (self.by.get_username() if self.by else "a deletion")
        return f"Archived on {self.archived_at:%Y-%m-%d}: its points were deleted by {who}"


class ProjectArchive(models.Model):
    """A project deleted while its decision log held entries: its runs went or were archived, its tokens revoked."""

    project = models.OneToOneField("ingest.Project", on_delete=models.CASCADE, related_name="archive")
    archived_at = models.DateTimeField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
