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


class PersonalToken(models.Model):
    """A user's API token for scripts: it acts with that user's roles. Only its hash is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    PREFIX = "wlu_"

    @classmethod
    def issue(cls, user):
        import secrets

        from ingest.models import hash_token

        raw = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, token_hash=hash_token(raw), hint=raw[:11])
        return token, raw
