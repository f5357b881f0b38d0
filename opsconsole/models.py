from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer"
    ONCALL = "oncall", "on-call"
    RULE_ADMIN = "rule_admin", "rule admin"


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="membership_unique")]

    def __str__(self):
        return f"{self.user} in {self.project} ({self.role})"
