"""Run reviews (six steps, each a row), review schedules, and the append-only decision log.

A review belongs to one run. Steps 1-5 are filled from the stored data when the review opens
(reviews/steps/) and saved as they were shown, so the review reads the same later; step 6 is the
decision, which writes one decision-log entry. Every change of a review is a ReviewActivity row.

The decision log (LogEntry) is append-only below the application: the database refuses UPDATE and
DELETE on its table (migration 0002). A correction is a new entry naming the one it corrects.
"""
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q


class ReviewTrigger(models.TextChoices):
    MANUAL = "manual"  # someone started it (run page, API)
    ALERT = "alert"  # an alert of a rule whose permitted response is `review`
    SCHEDULE = "schedule"  # every N steps / H hours of run time (ReviewSchedule)
    NEXT_REVIEW = "next_review"  # the previous decision's next-review trigger came due


class ReviewState(models.TextChoices):
    OPEN = "open"
    DECIDED = "decided"


class StepState(models.TextChoices):
    PASS = "pass"
    ATTENTION = "attention"
    FAIL = "fail"
    NO_DATA = "no_data", "no data"


class DecisionKind(models.TextChoices):
    CONTINUE = "continue"
    INTERVENE = "intervene"
    TERMINATE = "terminate"


STEP_TITLES = {
    1: "Identity",
    2: "Hard invariants",
    3: "Expectation",
    4: "Slices",
    5: "Remaining value",
    6: "Decision",
}


def rewind_words(rewind: dict | None) -> str:
    """The rewind proposal in one sentence, as the review page and the log show it."""
    if not rewind:
        return ""
    text = (f"Rewind to the checkpoint at step {rewind['checkpoint_step']}, at least {rewind['margin']} steps before the "
            f"onset at step {rewind['onset_step']}: {rewind['steps_redone']:,} steps redone")
    nearer, difference = rewind.get("alert_checkpoint_step"), rewind.get("fewer_steps_than_alert_checkpoint")
    if nearer is not None and difference is not None:
        if difference >= 0:
            text += f", {difference:,} fewer than rewinding to step {nearer}, the last checkpoint before the alert"
        else:
            text += f", {-difference:,} more than rewinding to step {nearer}, the last checkpoint before the alert"
        if rewind.get("alert_checkpoint_after_onset"):
            text += " (which already holds the fault: it was saved after the onset)"
    skip = rewind.get("skip_batches") or {}
    if skip:
        text += f"; skip the batches of steps {skip['from_step']}-{skip['to_step']} ({skip['count']:,} steps)"
    return text + "."


# The shortest schedules. A review is a person's work of several minutes; below these a schedule opens reviews
# faster than anyone reads them (every_steps: 1 opened one per batch, every_hours: 0.01 one per beat tick).
# 100 steps is two of the 50-step windows the expectation step averages (reviews/steps/expectation.py), so each
# review has at least one window the previous one did not see; an hour keeps a person's queue to 24 a run a day.
MIN_EVERY_STEPS = 100
MIN_EVERY_HOURS = 1.0
MAX_EVERY_HOURS = 24 * 365


class ReviewSchedule(models.Model):
    """When reviews open by themselves: a project's default (run empty) or one run's own setting.

    A run's row, where there is one, replaces the project's. Steps count the run's own steps; hours count
    run time by the points' own times (the first point's time to the newest). Each bound is a floor
    (MIN_EVERY_STEPS, MIN_EVERY_HOURS); a run has at most one open scheduled review (reviews/triggers.py).
    """

    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="review_schedules")
    run = models.OneToOneField("ingest.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="review_schedule")
    every_steps = models.PositiveBigIntegerField(null=True, blank=True)
    every_hours = models.FloatField(null=True, blank=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project"], condition=Q(run__isnull=True), name="review_schedule_one_per_project"),
            models.CheckConstraint(condition=Q(every_steps__isnull=True) | Q(every_steps__gte=MIN_EVERY_STEPS),
                                   name="review_schedule_steps_floor"),
            models.CheckConstraint(condition=Q(every_hours__isnull=True) | Q(every_hours__gte=MIN_EVERY_HOURS),
                                   name="review_schedule_hours_floor"),
        ]

    def clean(self):
        schedule_bounds(self.every_steps, self.every_hours)

    @classmethod
    def of(cls, run) -> "ReviewSchedule | None":
        """The run's own schedule, else its project's."""
        schedules = {s.run_id: s for s in cls.objects.filter(project_id=run.project_id).filter(run__isnull=True)
                     | cls.objects.filter(run=run)}
        return schedules.get(run.pk) or schedules.get(None)


def schedule_bounds(every_steps, every_hours):
    """A schedule's figures, or the ValidationError naming the field below its floor (or neither given)."""
    if every_steps is None and every_hours is None:
        raise ValidationError({"every_steps": "give every_steps, every_hours or both"})
    if every_steps is not None and every_steps < MIN_EVERY_STEPS:
        raise ValidationError({"every_steps": f"at least {MIN_EVERY_STEPS} steps between scheduled reviews"})
    if every_hours is not None and not MIN_EVERY_HOURS <= every_hours <= MAX_EVERY_HOURS:
        raise ValidationError({"every_hours": f"between {MIN_EVERY_HOURS:g} and {MAX_EVERY_HOURS} hours between scheduled reviews"})


class Review(models.Model):
    run = models.ForeignKey("ingest.Run", on_delete=models.CASCADE, related_name="reviews")
    trigger = models.CharField(max_length=16, choices=ReviewTrigger.choices)
    # What brought it: {"every_steps": 2000, "due_step": 4000}, {"entry": 7, "step": 5000}, {"rule": "loss-spike"}, …
    trigger_detail = models.JSONField(default=dict, blank=True)
    # A review that opens by itself opens once: "alert:<id>", "steps:<due step>", "hours:<n>", "entry:<id>".
    due_key = models.CharField(max_length=64, blank=True, default="")
    alert = models.ForeignKey("alerts.Alert", null=True, blank=True, on_delete=models.SET_NULL, related_name="reviews")
    incident = models.ForeignKey("alerts.Incident", null=True, blank=True, on_delete=models.SET_NULL, related_name="reviews")
    # The run the config and curves are compared with: its reference run by default, the reviewer's choice otherwise.
    comparison = models.ForeignKey("ingest.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The review before it on the same run: "since the last review" starts where that one opened.
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=16, choices=ReviewState.choices, default=ReviewState.OPEN)
    opened_at = models.DateTimeField()
    opened_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    opened_step = models.BigIntegerField(null=True)  # the run's newest step when it opened
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "due_key"], condition=~Q(due_key=""), name="review_opens_once"),
        ]
        indexes = [models.Index(fields=["run", "state"], name="review_run_state")]

    def __str__(self):
        return f"review #{self.pk} of {self.run_id}"


class ReviewStep(models.Model):
    """One of the six steps of a review, as it was shown: its state, findings and evidence links."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="steps")
    number = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=16, choices=StepState.choices, blank=True)
    summary = models.TextField(blank=True)
    # What the step found, as shown: structured per step (reviews/steps/shared.py documents the shape).
    findings = models.JSONField(default=dict, blank=True)
    # [{"label": "loss at steps 1200-1400", "href": "/runs/x/?metric=loss&start=1200&end=1400"}, …]
    evidence = models.JSONField(default=list, blank=True)
    filled_at = models.DateTimeField(null=True, blank=True)
    checked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    checked_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["review", "number"], name="review_step_unique"),
            models.CheckConstraint(condition=Q(number__gte=1) & Q(number__lte=6), name="review_step_one_to_six"),
        ]

    @property
    def title(self):
        return STEP_TITLES.get(self.number, "")


class ActivityKind(models.TextChoices):
    OPENED = "opened"
    FILLED = "filled"  # steps 1-5 filled from the stored data (again, after a new comparison run)
    COMPARISON = "comparison"  # the reviewer chose another comparison run
    CHECKED = "checked"  # a reviewer went through a step (with a note)
    DECIDED = "decided"


class ReviewActivity(models.Model):
    """Every change of a review is its own row: who did each step, and when."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="activity")
    kind = models.CharField(max_length=16, choices=ActivityKind.choices)
    step = models.PositiveSmallIntegerField(null=True, blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField()
    note = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]


class LogEntry(models.Model):
    """One entry of the decision log: append-only (the database refuses UPDATE and DELETE on this table).

    PROTECT on every key: a run, review or entry the log names cannot be deleted from under it.
    """

    project = models.ForeignKey("ingest.Project", on_delete=models.PROTECT, related_name="log_entries")
    run = models.ForeignKey("ingest.Run", on_delete=models.PROTECT, related_name="log_entries")
    # The review whose decision wrote it (one entry per review); empty for an entry written on the run.
    review = models.OneToOneField(Review, null=True, blank=True, on_delete=models.PROTECT, related_name="decision")
    decision = models.CharField(max_length=16, choices=DecisionKind.choices, blank=True)
    observation = models.TextField()
    explanations = models.JSONField()  # one or more competing explanations, as a list of strings
    action = models.TextField(blank=True)
    owner = models.CharField(max_length=300)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField()
    step = models.BigIntegerField(null=True, blank=True)  # the run's newest step when written
    expected_next = models.TextField(blank=True)  # the evidence expected next
    # {"alerts": [ids], "incidents": [ids], "reviews": [ids], "steps": [steps], "runs": [run ids]}
    links = models.JSONField(default=dict, blank=True)
    # The next review: {"step": 5000} | {"at": "2026-12-01T18:00:00+00:00"} | {"rule": "loss-spike"}; null for none.
    next_review = models.JSONField(null=True, blank=True)
    # Terminate: the reviewer confirmed the artifacts are preserved, with the last checkpoint step shown then.
    artifacts_preserved = models.BooleanField(default=False)
    last_checkpoint_step = models.BigIntegerField(null=True, blank=True)
    # Intervene on an incident: the rewind proposed (checkpoint step, steps redone, batches to skip), as shown.
    rewind = models.JSONField(null=True, blank=True)
    corrects = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="corrections")

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["run", "at"], name="log_entry_run_at"), models.Index(fields=["project", "at"], name="log_entry_project_at")]
        constraints = [
            models.CheckConstraint(condition=~Q(observation=""), name="log_entry_observation_required"),
            models.CheckConstraint(condition=~Q(owner=""), name="log_entry_owner_required"),
            models.CheckConstraint(condition=~Q(decision="terminate") | Q(artifacts_preserved=True), name="log_entry_terminate_preserves"),
        ]

    def __str__(self):
        return f"log entry #{self.pk} on {self.run_id}"

    @property
    def rewind_words(self) -> str:
        return rewind_words(self.rewind)
