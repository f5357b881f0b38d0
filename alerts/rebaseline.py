"""A person declares a new normal: the level an alert's metric holds now is what the run should be judged by.

Band rules never learn a lasting change of level by themselves (alerts/bands.py `judged_band`: an excursion
is judged against the band it left until it comes back), so a change that is legitimately the new normal
is said by someone: a phase that starts the baseline again (a data refresh), an announced change of the
run's config (ingest/phases.py), or a person here. The person's word is an AlertChange row of its own
(`new_normal`, with who and why) beside the alert's resolution, so the chart's restarted band has a name
and a reason in the alert's history and in the audit report.
"""
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from alerts import triage
from alerts.models import Alert, AlertState, ChangeKind, RuleKind, RuleProgress
from alerts.tasks import EVALUATION_LOCK_BASE

# What a band judge keeps that describes the old level; the rest (attempt, data refresh, peak) stays.
LEVEL_KEYS = ("history", "pending", "tail", "from")
LEARNING_KINDS = (RuleKind.BAND, RuleKind.WEIGHT_JUMP)


def accept_new_normal(alert: Alert, user, note: str, now=None):
    """Resolve a band alert and start its (rule, run, component) band again from the next points: the rule
    judges nothing there until it has `min_history` points of the new level. Returns the `new_normal` row.
    A note saying why is required; only band and weight-jump rules have a level to accept."""
    now = now or timezone.now()
    note = triage._text(note, "note")
    if not note:
        raise ValidationError({"note": "a note is required: say why this level is the run's new normal"})
    if alert.rule.kind not in LEARNING_KINDS:
        raise ValidationError({"rule": f"only band and weight-jump rules have a level to accept; {alert.rule.name} is "
                                       f"a {alert.rule.kind} rule"})
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # Evaluation holds this lock while it judges the run and writes RuleProgress back from memory:
            # taking it here means the band is not written over by a batch judged against the old one.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [EVALUATION_LOCK_BASE + int(alert.run_id)])
        if not Alert.objects.filter(pk=alert.pk).exclude(state=AlertState.RESOLVED).exists():
            raise ValidationError({"state": f"alert {alert.pk} is resolved: only an open alert's level can be accepted"})
        rows = list(RuleProgress.objects.select_for_update().filter(rule=alert.rule, run=alert.run, component=alert.component))
        for progress in rows:
            progress.state = {k: v for k, v in (progress.state or {}).items() if k not in LEVEL_KEYS}
            progress.held_points = 0
            progress.clear_points = 0
            progress.save(update_fields=["state", "held_points", "clear_points"])
        change = triage._record(alert, ChangeKind.NEW_NORMAL, user, now, note=note, step=alert.last_step)
        triage.resolve(alert, user, note=f"new normal from step {alert.last_step}: {note}", now=now)
    return change
