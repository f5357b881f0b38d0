"""Projects, tokens, runs and their telemetry.

Points are not stored one per row: a row per point costs PostgreSQL ~60 bytes
of tuple and index overhead alone, against the 24 bytes per point target. A
`Block` packs the points of one series from one batch (and one attempt) into a
compressed blob, with min/max/count/non-finite count beside it; `Rollup` keeps
the same summary per fixed bucket of steps for the newest attempt of each step.
See `ingest/storage.py`, the only module that reads or writes them.
"""
import hashlib
import secrets

from django.db import models
from django.db.models import Q


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, blank=True)
    # The on-call owner: a person or team, and how to reach them.
    owner_name = models.CharField(max_length=200, blank=True)
    owner_contact = models.CharField(max_length=300, blank=True)
    # Read-only (the default) means nothing the console does ever touches a job.
    read_only = models.BooleanField(default=True)
    # When the starter rule pack was installed (once; deleting a starter rule keeps it deleted).
    starter_pack_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.slug

    @property
    def catch_all_run_id(self) -> str:
        """The run that takes this project's Alertmanager alerts without a usable `run` label."""
        return f"{self.slug}{CATCH_ALL_SUFFIX}"


# Run ids end in this only as a project's catch-all: reserved for the project whose slug comes before it
# (ingest/service.py), so no other project can take the name first.
CATCH_ALL_SUFFIX = "/unassigned"


TOKEN_PREFIX = "wl_"


def hash_token(raw: str) -> str:
    # Tokens are 256 random bits, so a fast hash is safe and keeps auth one indexed lookup.
    return hashlib.sha256(raw.encode()).hexdigest()


class ProjectToken(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    # The first characters, to tell tokens apart in the admin without storing the secret.
    hint = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    @classmethod
    def issue(cls, project):
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(project=project, token_hash=hash_token(raw), hint=raw[:10])
        return token, raw

    def __str__(self):
        return f"{self.hint}… ({self.project})"


class RunStatus(models.TextChoices):
    HEALTHY = "healthy"
    ALERTING = "alerting"
    STALLED = "stalled"
    FINISHED = "finished"


class Run(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    # The sender's run id. Unique across the console, not only the project: the
    # read API addresses a run by this id alone, and a token of another project
    # must not be able to write into it.
    run_id = models.CharField(max_length=128, unique=True)
    name = models.CharField(max_length=256, blank=True)
    code_rev = models.CharField(max_length=128, blank=True)
    data_snapshot = models.CharField(max_length=256, blank=True)
    config = models.JSONField(null=True, blank=True)
    budget = models.JSONField(null=True, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    # A reference run's telemetry is part of the project's baseline bands (alerts/bands.py).
    reference = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.HEALTHY)
    attempt = models.PositiveIntegerField(default=1)
    # Highest step stored in the current attempt, and in any attempt (ingest keeps these).
    attempt_max_step = models.BigIntegerField(null=True, blank=True)
    max_step = models.BigIntegerField(null=True, blank=True)
    # Highest step that evaluation has seen (the evaluation task keeps this).
    last_step = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "-last_seen_at"])]

    def __str__(self):
        return self.run_id


class IdentityChange(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="identity_changes")
    field = models.CharField(max_length=32)
    old = models.JSONField(null=True)
    new = models.JSONField(null=True)
    step = models.BigIntegerField(null=True)
    changed_at = models.DateTimeField()
    receipt = models.ForeignKey("BatchReceipt", on_delete=models.CASCADE)

    class Meta:
        ordering = ["id"]


class AttemptReason(models.TextChoices):
    FIRST = "first", "first"
    RESTART_PHASE = "restart_phase", "restart phase"
    RESENT_STEP = "resent_step", "resent step"


class Attempt(models.Model):
    """One continuous stretch of a run; a restart starts a new one.

    `previous_max_step` is where the attempt before it had got to: when
    `start_step` is at or below it the job rewound (re-sent steps), from
    `previous_max_step` back to `start_step`.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    reason = models.CharField(max_length=16, choices=AttemptReason.choices)
    start_step = models.BigIntegerField(null=True)
    previous_max_step = models.BigIntegerField(null=True)
    started_at = models.DateTimeField()

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="attempt_unique_number")]

    @property
    def is_rewind(self):
        return self.previous_max_step is not None and self.start_step is not None and self.start_step <= self.previous_max_step


class BatchReceipt(models.Model):
    """One accepted batch: the idempotency key and the unit of evaluation."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="receipts")
    batch_id = models.CharField(max_length=128, null=True, blank=True)
    received_at = models.DateTimeField()
    points = models.PositiveIntegerField(default=0)
    events = models.PositiveIntegerField(default=0)
    phases = models.PositiveIntegerField(default=0)
    min_step = models.BigIntegerField(null=True)
    max_step = models.BigIntegerField(null=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    # When the batch was last handed to the evaluation queue (ingest hands it over as it commits); null when it
    # never reached the queue (the broker was down). The sweep queues only batches nobody holds: never queued, or
    # queued so long ago that the message must be lost (alerts/tasks.py), so a backlog is never queued twice.
    queued_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "batch_id"], condition=Q(batch_id__isnull=False), name="receipt_unique_batch_id"
            )
        ]
        indexes = [
            models.Index(fields=["received_at"], condition=Q(evaluated_at__isnull=True), name="receipt_unevaluated")
        ]


class Phase(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="phases")
    step = models.BigIntegerField()
    phase = models.CharField(max_length=64)  # as sent
    kind = models.CharField(max_length=16)  # vocabulary word used for baselines
    time = models.FloatField()
    attempt = models.PositiveIntegerField()
    receipt = models.ForeignKey(BatchReceipt, on_delete=models.CASCADE)

    class Meta:
        # Contract: ties at one step go to the later time, then the later arrival.
        ordering = ["step", "time", "id"]
        indexes = [models.Index(fields=["run", "step"])]


class Layer(models.TextChoices):
    SYSTEM = "system"
    DATA = "data"
    NUMERICS = "numerics"
    OPTIMIZATION = "optimization"
    GENERALIZATION = "generalization"


class Series(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="series")
    metric = models.CharField(max_length=128)
    component = models.CharField(max_length=256, blank=True, default="")  # "" = the whole run
    layer = models.CharField(max_length=16, choices=Layer.choices)
    max_step = models.BigIntegerField(default=-1)
    last_time = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "metric", "component"], name="series_unique_key")]

    def __str__(self):
        return f"{self.metric}@{self.component or 'run'}"


class Block(models.Model):
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="blocks", db_index=False)
    attempt = models.PositiveIntegerField()
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    count = models.PositiveIntegerField()
    nonfinite_count = models.PositiveIntegerField()
    min_value = models.FloatField(null=True)  # finite values only; null when none
    max_value = models.FloatField(null=True)
    receipt = models.ForeignKey(BatchReceipt, on_delete=models.CASCADE, db_index=False)
    data = models.BinaryField()

    class Meta:
        indexes = [
            # Every read asks "blocks of this series that reach step >= X".
            models.Index(fields=["series", "last_step"], name="block_series_last_step"),
            models.Index(fields=["receipt"], name="block_receipt"),
        ]


ROLLUP_WIDTH = 128


class Rollup(models.Model):
    """Summary of steps [bucket*W, (bucket+1)*W) of a series, newest attempt of each step."""

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="rollups", db_index=False)
    bucket = models.BigIntegerField()
    count = models.PositiveIntegerField()
    nonfinite_count = models.PositiveIntegerField()
    min_value = models.FloatField(null=True)
    max_value = models.FloatField(null=True)
    last_step = models.BigIntegerField()
    last_value = models.FloatField(null=True)  # null means NaN: SQLite cannot store a NaN REAL

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series", "bucket"], name="rollup_unique_bucket")]


class Condition(models.TextChoices):
    DEAD = "dead"
    OSCILLATING = "oscillating"
    SATURATED = "saturated"
    STAGNANT = "stagnant"
    EXPLODING = "exploding"
    LOW_CONFIDENCE = "low_confidence"
    LOST_GRADIENT = "lost_gradient"
    UNCLASSIFIED = "unclassified"


class EventSource(models.TextChoices):
    JOB = "job"
    ALERTMANAGER = "alertmanager"


class Event(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    source = models.CharField(max_length=16, choices=EventSource.choices, default=EventSource.JOB)
    layer = models.CharField(max_length=16, choices=Layer.choices, default=Layer.NUMERICS)
    attempt = models.PositiveIntegerField()
    step = models.BigIntegerField()
    component = models.CharField(max_length=256)
    condition = models.CharField(max_length=16, choices=Condition.choices)
    magnitude = models.FloatField(null=True)  # null means NaN, as in Rollup.last_value
    time = models.FloatField()
    detail = models.JSONField(null=True, blank=True)
    receipt = models.ForeignKey(BatchReceipt, on_delete=models.CASCADE)
    # Alertmanager alerts: its fingerprint, and when a resolved notification ended it (Unix seconds) with
    # the receipt of that notification, which evaluation reads to end the alerts the event held open.
    # Job-reported events are instants: they never end.
    fingerprint = models.CharField(max_length=64, blank=True, default="")
    ended_at = models.FloatField(null=True, blank=True)
    ended_by = models.ForeignKey(BatchReceipt, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="ended_events", db_index=False)

    class Meta:
        indexes = [
            models.Index(fields=["run", "step"]),
            models.Index(fields=["run", "fingerprint"], condition=~Q(fingerprint=""), name="event_fingerprint"),
            models.Index(fields=["ended_by"], condition=Q(ended_by__isnull=False), name="event_ended_by"),
        ]
