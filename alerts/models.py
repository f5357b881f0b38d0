"""Alert rules with their governance fields, and every revision of each rule."""
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q

from alerts import governance
from alerts.params import params_errors


class RuleKind(models.TextChoices):
    NONFINITE = "nonfinite"
    THRESHOLD = "threshold"
    BAND = "band"
    ABSENCE = "absence"
    EVENT = "event"
    DIVERGENCE = "divergence"
    WEIGHT_JUMP = "weight_jump"
    REFERENCE = "reference"


class PermittedResponse(models.TextChoices):
    OBSERVE = "observe"
    NOTIFY = "notify"
    REVIEW = "review"
    STOP = "stop"
    REWIND = "rewind"


class Rule(models.Model):
    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="rules")
    name = models.SlugField(max_length=100)
    kind = models.CharField(max_length=16, choices=RuleKind.choices)
    description = models.TextField(blank=True)
    # Governance: required, non-empty, on every path (see alerts/governance.py).
    owner = models.CharField(max_length=300)
    scope = models.JSONField()
    persistence = models.JSONField()
    diagnostic_url = models.CharField(max_length=500)  # http(s) URL, checked by alerts/governance.py
    permitted_response = models.CharField(max_length=16, choices=PermittedResponse.choices)
    # Kind-specific settings (a threshold, a band's width, …).
    params = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="rule_unique_name"),
            models.CheckConstraint(condition=~Q(owner=""), name="rule_owner_required"),
            models.CheckConstraint(condition=~Q(diagnostic_url=""), name="rule_diagnostic_url_required"),
            models.CheckConstraint(condition=~Q(scope={}) & Q(scope__isnull=False), name="rule_scope_required"),
            models.CheckConstraint(condition=~Q(persistence={}) & Q(persistence__isnull=False), name="rule_persistence_required"),
            models.CheckConstraint(
                condition=Q(permitted_response__in=[r for r in PermittedResponse.values if r not in governance.AUTOMATIC_RESPONSES])
                | Q(permitted_response__in=governance.AUTOMATIC_RESPONSES, kind__in=governance.HARD_INVARIANT_KINDS),
                name="rule_response_allowed",
            ),
        ]

    def __str__(self):
        return f"{self.project}/{self.name}"

    def clean(self):
        errors = governance.governance_errors(
            kind=self.kind,
            owner=self.owner,
            scope=self.scope,
            persistence=self.persistence,
            diagnostic_url=self.diagnostic_url,
            permitted_response=self.permitted_response,
        )
        # Each problem on `params.<key>`; forms fold these onto their params field (alerts/forms.py).
        errors.update(params_errors(self.kind, self.params))
        if errors:
            raise ValidationError(errors)

    def snapshot(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "owner": self.owner,
            "scope": self.scope,
            "persistence": self.persistence,
            "diagnostic_url": self.diagnostic_url,
            "permitted_response": self.permitted_response,
            "params": self.params,
            "enabled": self.enabled,
        }


class RevisionAction(models.TextChoices):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


class RuleRevision(models.Model):
    """One row per change of a rule: who, when, and the rule as it then stood."""

    rule = models.ForeignKey(Rule, on_delete=models.SET_NULL, null=True, related_name="revisions")
    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE)
    rule_name = models.CharField(max_length=100)
    action = models.CharField(max_length=16, choices=RevisionAction.choices)
    snapshot = models.JSONField()
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    source = models.CharField(max_length=32)  # api, admin, console, load_rules
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class AlertState(models.TextChoices):
    FIRING = "firing"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"
    MUTED = "muted"


class Verdict(models.TextChoices):
    ACTIONABLE = "actionable"
    FALSE_ALARM = "false_alarm"


class Alert(models.Model):
    """One incident of a rule on one component of one run: repeats extend it, it never duplicates."""

    rule = models.ForeignKey(Rule, on_delete=models.PROTECT, related_name="alerts")
    run = models.ForeignKey("ingest.Run", on_delete=models.CASCADE, related_name="alerts")
    component = models.CharField(max_length=256, blank=True)  # "" = the whole run
    metric = models.CharField(max_length=128, blank=True)
    condition = models.CharField(max_length=16, blank=True)  # for event-based alerts
    first_step = models.BigIntegerField()
    last_step = models.BigIntegerField()
    # The step at which persistence was satisfied and it fired (first_step is when the condition began).
    fired_step = models.BigIntegerField(null=True)
    magnitude = models.FloatField(null=True)
    magnitude_unit = models.CharField(max_length=64)
    phase = models.CharField(max_length=64, blank=True)  # phase in effect at the first step
    state = models.CharField(max_length=16, choices=AlertState.choices, default=AlertState.FIRING)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, null=True, blank=True)
    fired_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    # When a person first looked at it (acknowledged it, gave a verdict, resolved it by hand): a hard-invariant
    # alert whose condition cleared stays in the inbox, and its run needs review, until then (alerts/incidents.py).
    reviewed_at = models.DateTimeField(null=True, blank=True)
    # The incident it is part of (alerts/incidents.py groups each alert once, when evaluation creates it).
    incident = models.ForeignKey("Incident", null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts")

    class Meta:
        ordering = ["fired_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "run", "component"], condition=~Q(state="resolved"), name="alert_one_open_per_component"
            )
        ]
        # A rule's alerts of a period (the audit report, fatigue) and its newest one: a range, not all its alerts.
        indexes = [models.Index(fields=["rule", "fired_at"], name="alert_rule_fired_at"),
                   # The inbox's newest "resolved, no verdict" (half of all alerts): read newest first, not sorted.
                   models.Index(F("fired_at").desc(), F("id").desc(), name="alert_resolved_no_verdict",
                                condition=Q(state="resolved", verdict__isnull=True)),
                   # The inbox's default view, newest first, and its "needs review" runs: the open alerts and those
                   # that resolved with nobody looking (a few thousand of 100,000), not a scan of every alert.
                   models.Index(F("fired_at").desc(), F("id").desc(), name="alert_inbox_open",
                                condition=Q(state__in=[AlertState.FIRING, AlertState.ACKNOWLEDGED, AlertState.MUTED])
                                | Q(state=AlertState.RESOLVED, reviewed_at__isnull=True))]


class ChangeKind(models.TextChoices):
    FIRED = "fired"
    EXTENDED = "extended"
    RESOLVED = "resolved"
    ACKNOWLEDGED = "acknowledged"
    VERDICT = "verdict"
    MUTED = "muted"
    UNMUTED = "unmuted"  # a mute that covered it expired (alerts/triage.py)
    NEW_NORMAL = "new_normal"  # a person accepted the level it holds as the run's new baseline (alerts/rebaseline.py)


class AlertChange(models.Model):
    """Every state change of an alert is its own row: history and audit are plain queries."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="changes")
    kind = models.CharField(max_length=16, choices=ChangeKind.choices)
    step = models.BigIntegerField(null=True)
    at = models.DateTimeField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    receipt = models.ForeignKey("ingest.BatchReceipt", null=True, blank=True, on_delete=models.SET_NULL)
    note = models.TextField(blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, blank=True)  # on "verdict" rows: the one given

    class Meta:
        ordering = ["id"]
        # The changes a person made (a fifth of the rows; the rest are the evaluator's fired, extended and resolved
        # rows): the audit report and the fatigue page read these of a period's alerts without touching the table.
        indexes = [models.Index(
            fields=["alert"], include=["kind", "at", "verdict"], name="alertchange_by_person",
            condition=Q(kind__in=["acknowledged", "verdict"]) | Q(kind="resolved", by__isnull=False))]


class RuleProgress(models.Model):
    """How long a rule's condition has held (or been clear) on one series of a run: the persistence state."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE)
    run = models.ForeignKey("ingest.Run", on_delete=models.CASCADE)
    component = models.CharField(max_length=256, blank=True)
    metric = models.CharField(max_length=128, blank=True)
    held_points = models.PositiveIntegerField(default=0)
    held_since_step = models.BigIntegerField(null=True)
    held_since_time = models.FloatField(null=True)
    clear_points = models.PositiveIntegerField(default=0)
    # Kind-specific memory between batches (a band's history per phase kind, the last step seen, …).
    state = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule", "run", "component", "metric"], name="progress_unique_series")
        ]


# A mute always ends: expires_at is required and at most this far ahead, unless the project's MuteSettings say
# otherwise (alerts/triage.py checks it); a rule admin may go past the project's limit, flagged `over_limit`,
# but never past the ceiling.
MAX_MUTE_DURATION = timedelta(days=7)
MUTE_DURATION_CEILING = timedelta(days=365)
# A mute that has covered no alert for this many days ends by itself (the sweep, alerts/triage.py).
DEFAULT_UNUSED_MUTE_DAYS = 3
MAX_UNUSED_MUTE_DAYS = 365


class MuteSettings(models.Model):
    """A project's mute limits (one row, or none: the defaults)."""

    project = models.OneToOneField("ingest.Project", on_delete=models.CASCADE, related_name="mute_settings")
    max_duration_hours = models.PositiveIntegerField(default=int(MAX_MUTE_DURATION / timedelta(hours=1)))
    unused_days = models.PositiveIntegerField(default=DEFAULT_UNUSED_MUTE_DAYS)

    class Meta:
        verbose_name_plural = "mute settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(max_duration_hours__gte=1, max_duration_hours__lte=MUTE_DURATION_CEILING / timedelta(hours=1)),
                name="mute_max_duration_bounded",
            ),
            models.CheckConstraint(condition=Q(unused_days__gte=1, unused_days__lte=MAX_UNUSED_MUTE_DAYS),
                                   name="mute_unused_days_bounded"),
        ]

    @classmethod
    def of(cls, project_id) -> "MuteSettings":
        """The project's settings, or the defaults (unsaved) when it has none."""
        return cls.objects.filter(project_id=project_id).first() or cls(project_id=project_id)

    @classmethod
    def of_projects(cls, project_ids) -> dict:
        """`of` for several projects in one query: {project_id: settings}."""
        found = {s.project_id: s for s in cls.objects.filter(project_id__in=project_ids)} if project_ids else {}
        return {pk: found.get(pk) or cls(project_id=pk) for pk in project_ids}

    @property
    def max_duration(self) -> timedelta:
        return timedelta(hours=self.max_duration_hours)

    def clean(self):
        ceiling = int(MUTE_DURATION_CEILING / timedelta(hours=1))
        if not isinstance(self.max_duration_hours, int) or not 1 <= self.max_duration_hours <= ceiling:
            raise ValidationError({"max_duration_hours": f"max_duration_hours must be a whole number from 1 to {ceiling}"})
        if not isinstance(self.unused_days, int) or not 1 <= self.unused_days <= MAX_UNUSED_MUTE_DAYS:
            raise ValidationError({"unused_days": f"unused_days must be a whole number from 1 to {MAX_UNUSED_MUTE_DAYS}"})


class MuteEndReason(models.TextChoices):
    EXPIRED = "expired", "expired"  # its expires_at passed (the sweep)
    ENDED_BY_PERSON = "ended_by_person", "ended by a person"  # someone ended it early (`ended_by`)
    UNUSED = "unused", "ended unused"  # it covered no alert for the project's unused_days (the sweep)
    REPLACED = "replaced", "replaced by an extension"  # the mute that `extends` it took over


class MuteScope(models.TextChoices):
    RULE = "rule"  # the rule on every run of its project
    RUN = "run"  # the rule on one run
    COMPONENT = "component"  # the rule on one component of one run


class MuteQuerySet(models.QuerySet):
    def active(self, now):
        return self.filter(ended_at__isnull=True, expires_at__gt=now)

    def covering(self, alert):
        """Mutes whose scope takes in this alert (active or not)."""
        return self.filter(rule_id=alert.rule_id).filter(
            Q(scope=MuteScope.RULE)
            | Q(scope=MuteScope.RUN, run_id=alert.run_id)
            | Q(scope=MuteScope.COMPONENT, run_id=alert.run_id, component=alert.component)
        )


class Mute(models.Model):
    """An on-call decision to keep a rule's alerts quiet for a while, with a reason; it always expires.

    Active while not ended and expires_at is in the future. The periodic sweep
    ends expired mutes and puts the alerts they kept muted back to firing. Who ended
    it, when and why are `ended_by`, `ended_at`, `end_reason`; the alerts it held are
    its MuteHold rows; an extension is a new mute whose `extends` names this one.
    """

    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="mutes")
    scope = models.CharField(max_length=16, choices=MuteScope.choices)
    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="mutes")
    run = models.ForeignKey("ingest.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="mutes")
    component = models.CharField(max_length=256, blank=True)  # scope component only ("" = the whole run)
    reason = models.TextField()
    expires_at = models.DateTimeField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    end_reason = models.CharField(max_length=16, choices=MuteEndReason.choices, blank=True)
    # An extension is a new mute naming the one it replaced.
    extends = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="extensions")
    # Longer than the project's maximum duration when made (only a rule admin may): the audit report flags it.
    over_limit = models.BooleanField(default=False)

    objects = MuteQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["rule", "ended_at"], name="mute_rule_open")]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="mute_reason_required"),
            models.CheckConstraint(
                condition=Q(scope=MuteScope.RULE, run__isnull=True)
                | Q(scope__in=[MuteScope.RUN, MuteScope.COMPONENT], run__isnull=False),
                name="mute_run_matches_scope",
            ),
            models.CheckConstraint(condition=Q(scope=MuteScope.COMPONENT) | Q(component=""), name="mute_component_only_for_component"),
            # An ended mute says why; an active one has no reason to end.
            models.CheckConstraint(condition=Q(ended_at__isnull=True, end_reason="") | Q(ended_at__isnull=False) & ~Q(end_reason=""),
                                   name="mute_end_reason_when_ended"),
        ]

    def __str__(self):
        return f"mute #{self.pk} of {self.rule_id} ({self.scope}) until {self.expires_at:%Y-%m-%d %H:%M}"

    def covers(self, alert) -> bool:
        """In Python, what alerts_q says in SQL."""
        if alert.rule_id != self.rule_id:
            return False
        if self.scope == MuteScope.RULE:
            return True
        return alert.run_id == self.run_id and (self.scope == MuteScope.RUN or alert.component == self.component)

    def alerts_q(self) -> Q:
        """The alerts this mute takes in."""
        q = Q(rule_id=self.rule_id)
        if self.scope != MuteScope.RULE:
            q &= Q(run_id=self.run_id)
        if self.scope == MuteScope.COMPONENT:
            q &= Q(component=self.component)
        return q


class MuteHold(models.Model):
    """An alert this mute muted, and when: written whenever a mute moves an alert to muted or takes one over."""

    mute = models.ForeignKey(Mute, on_delete=models.CASCADE, related_name="holds")
    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="mute_holds")
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["mute", "at"], name="mutehold_mute_at")]


class MuteComment(models.Model):
    """A mute's comment log: people's notes, and the console's own (no `by`), e.g. why the sweep ended it."""

    mute = models.ForeignKey(Mute, on_delete=models.CASCADE, related_name="comments")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField()
    text = models.TextField()

    class Meta:
        ordering = ["at", "id"]
        constraints = [models.CheckConstraint(condition=~Q(text=""), name="mutecomment_text_required")]


class BandSample(models.Model):
    """The band a rule judged a series with, at the last point of each rollup bucket: what a wide chart draws.

    Written by evaluation as it judges, so a chart of a whole 10 M-point run
    reads a row per 128 steps instead of replaying every point; zoomed charts
    replay the rule's judge over the raw points (alerts.evaluation.chart_band).
    """

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="band_samples")
    series = models.ForeignKey("ingest.Series", on_delete=models.CASCADE, related_name="band_samples")
    bucket = models.BigIntegerField()
    step = models.BigIntegerField()
    centre = models.FloatField(null=True)
    lower = models.FloatField(null=True)
    upper = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "series", "bucket"], name="band_sample_unique_bucket")]


class RuleFaultKind(models.TextChoices):
    FAILED = "failed"  # the rule raised, or its stored settings do not validate: not judged on this batch
    RECOVERED = "recovered"  # the first batch it judged cleanly after failing


class RuleFault(models.Model):
    """A batch a rule could not judge (with the error), or the batch it judged cleanly again: its health is these rows.

    Evaluation records them (alerts/evaluation.py, alerts/faults.py) and goes on
    with the batch's other rules; the rules pages and the API show the rule as
    broken, with the last error and the count, until it recovers.
    """

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="faults")
    kind = models.CharField(max_length=16, choices=RuleFaultKind.choices)
    receipt = models.ForeignKey("ingest.BatchReceipt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    run = models.ForeignKey("ingest.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        # Latest failure and recovery, and the failure count, of each rule: what every rules page reads.
        indexes = [models.Index(fields=["rule", "kind", "id"], name="rule_fault_latest")]


# Alerts whose first steps are at most this many steps apart may form one incident, unless the project says
# otherwise: the client's default health_every is 10, so a fault seen in the loss at one step is seen in the
# components at the next health sample, up to 9 steps later.
DEFAULT_INCIDENT_WINDOW_STEPS = 10
MAX_INCIDENT_WINDOW_STEPS = 10_000


class IncidentSettings(models.Model):
    """A project's incident grouping settings (one row, or none: the defaults)."""

    project = models.OneToOneField("ingest.Project", on_delete=models.CASCADE, related_name="incident_settings")
    window_steps = models.PositiveIntegerField(default=DEFAULT_INCIDENT_WINDOW_STEPS)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(window_steps__lte=MAX_INCIDENT_WINDOW_STEPS), name="incident_window_bounded"),
        ]

    def clean(self):
        if not isinstance(self.window_steps, int) or not 0 <= self.window_steps <= MAX_INCIDENT_WINDOW_STEPS:
            raise ValidationError({"window_steps": f"window_steps must be a whole number of steps from 0 to {MAX_INCIDENT_WINDOW_STEPS}"})


class IncidentState(models.TextChoices):
    FIRING = "firing"  # an alert of it is firing
    ACKNOWLEDGED = "acknowledged"  # none firing, someone has taken one on
    MUTED = "muted"  # every open alert of it is muted
    NEEDS_REVIEW = "needs_review"  # every condition cleared, but a hard invariant of it was never looked at
    RESOLVED = "resolved"


class Incident(models.Model):
    """Alerts of one run that one fault caused: a named origin, its blast radius, the highest response.

    Its state, origin, first step and severity follow its alerts (alerts/incidents.py); each change is an
    IncidentChange row.
    """

    run = models.ForeignKey("ingest.Run", on_delete=models.CASCADE, related_name="incidents")
    origin = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    first_step = models.BigIntegerField()
    severity = models.CharField(max_length=16, choices=PermittedResponse.choices)
    state = models.CharField(max_length=16, choices=IncidentState.choices, default=IncidentState.FIRING)
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["opened_at", "id"]
        indexes = [models.Index(fields=["run", "state"], name="incident_run_state")]


class IncidentChangeKind(models.TextChoices):
    OPENED = "opened"
    JOINED = "joined"  # a later alert joined it (`alert`)
    ORIGIN = "origin"  # its origin was judged again and is now `alert`
    STATE = "state"  # its state followed its alerts (`state`, from `previous`)
    ACKNOWLEDGED = "acknowledged"  # a person acted on the incident: each alert has its own AlertChange row too
    VERDICT = "verdict"
    MUTED = "muted"


class IncidentChange(models.Model):
    """Every change of an incident is its own row, like AlertChange."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="changes")
    kind = models.CharField(max_length=16, choices=IncidentChangeKind.choices)
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=16, choices=IncidentState.choices, blank=True)
    previous = models.CharField(max_length=16, choices=IncidentState.choices, blank=True)
    at = models.DateTimeField()
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    receipt = models.ForeignKey("ingest.BatchReceipt", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    note = models.TextField(blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, blank=True)

    class Meta:
        ordering = ["id"]


class BacktestState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    CUT = "cut"  # done within its budget of time or points: the result says what was judged
    FAILED = "failed"


ACTIVE_BACKTEST_STATES = (BacktestState.QUEUED, BacktestState.RUNNING)


class BacktestJob(models.Model):
    """One backtest a rule admin started: what was asked, who asked, and what came of it (alerts/backtest_jobs.py).

    It runs as a task (alerts/tasks.py `run_backtest`); the task takes it from QUEUED to RUNNING with a
    conditional update, so a task delivered twice replays once.
    """

    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, related_name="backtests")
    # A saved rule's backtest judges the rule as stored when it runs; a draft's fields are kept in `draft`.
    rule = models.ForeignKey(Rule, null=True, blank=True, on_delete=models.SET_NULL, related_name="backtests")
    draft = models.JSONField(null=True, blank=True)
    asked = models.JSONField(default=dict, help_text="the runs as asked: ids, tags, since, until")
    run_ids = models.JSONField(default=list, help_text="the runs chosen when it was started, in replay order")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(max_length=16, choices=BacktestState.choices, default=BacktestState.QUEUED)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # A draft that edits a saved rule is compared with it: the saved rule's fields as they were at the start are
    # replayed over the same runs (the FK only names it; it may change or go before the job runs).
    compared_with = models.ForeignKey(Rule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    saved = models.JSONField(null=True, blank=True, help_text="the saved rule's fields the draft is compared with")
    # Progress, written by the running task with a conditional UPDATE after each run (alerts/backtest_jobs.py).
    runs_total = models.PositiveIntegerField(default=0, help_text="runs to replay")
    runs_done = models.PositiveIntegerField(default=0, help_text="runs replayed so far")

    class Meta:
        ordering = ["-id"]
        # "How many of this project's backtests are queued or running": asked on every start.
        indexes = [models.Index(fields=["project", "state"], name="backtest_project_state")]

    @property
    def progress(self) -> str:
        """How far it got, in words: "Backtest running: 2 of 4 runs replayed" (the rule form and the API show it)."""
        if self.state == BacktestState.QUEUED:
            return "Backtest queued, waiting for a worker"
        if self.state == BacktestState.FAILED:
            return "Backtest failed"
        runs = f"{self.runs_done} of {self.runs_total} run{'s' if self.runs_total != 1 else ''} replayed"
        both = " with the draft and the saved rule" if self.saved is not None else ""
        return f"Backtest {self.state}: {runs}{both}"
