"""When reviews open by themselves: an alert of a `review` rule, a schedule, or a decision's next-review trigger.

Each opens a review once: its due_key ("incident:<id>", "alert:<id>", "steps:<step>", "hours:<n>",
"entry:<id>") is unique per run, so evaluation, the periodic task and a retried task can all try without
opening a second one. Steps 1-5 are filled after the trigger's transaction commits (reviews/tasks.py).

A schedule opens a review only for a run that is still sending (not finished, not stalled: the sweep's
RUN_STALLED_SECONDS), and only while the run has no open scheduled review: a review nobody has decided yet
covers the steps and hours since, so a busy or forgotten run gets one waiting review, not a pile of them.
"""
from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from alerts.models import PermittedResponse
from alerts.tasks import EVALUATION_LOCK_BASE
from ingest.models import Run, RunStatus
from reviews import lifecycle, signals
from reviews.models import LogEntry, Review, ReviewSchedule, ReviewState, ReviewTrigger

log = logging.getLogger(__name__)


def _opened(review):
    if review is not None:
        transaction.on_commit(lambda: signals.review_opened.send(sender=Review, review_id=review.pk))
    return review


def _open(run, trigger, due_key, now, **fields):
    return _opened(lifecycle.open_review(run, trigger, due_key=due_key, fill_now=False, now=now, **fields))


def _open_scheduled(run, due_key, now, detail):
    """A schedule's review, unless the run has one open already. Called under the run's evaluation lock (the
    evaluation holds it; the periodic task takes it), so the two paths cannot both find none and open two."""
    if Review.objects.filter(run=run, trigger=ReviewTrigger.SCHEDULE, state=ReviewState.OPEN).exists():
        return None
    return _open(run, ReviewTrigger.SCHEDULE, due_key, now, detail=detail)


def _holds_evaluation_lock(run) -> bool:
    """The run's evaluation lock for this transaction (alerts/tasks.py), if no evaluation holds it now."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [EVALUATION_LOCK_BASE + int(run.pk)])
        return cursor.fetchone()[0]


def sending_runs(now):
    """Runs a schedule still applies to: neither finished nor stalled (nothing received for RUN_STALLED_SECONDS,
    whether or not the sweep has marked them yet)."""
    quiet_since = now - timedelta(seconds=settings.RUN_STALLED_SECONDS)
    return Run.objects.exclude(status__in=[RunStatus.FINISHED, RunStatus.STALLED]).filter(last_seen_at__gte=quiet_since)


def reviews_for_fired_alerts(sender, alerts, now, **kwargs):
    """alerts.signals.alerts_fired: a `review` rule's alert opens a review (one per incident), and so does the
    next alert of a rule a decision named as its next-review trigger. The run's waiting entries are read once
    for all of the alerts, and each opens its review at the first alert of its rule, in the alerts' order."""
    if not alerts:
        return
    run = alerts[0].run
    waiting = _waiting_entries(run, next_review__rule__in=sorted({alert.rule.name for alert in alerts}))
    for alert in alerts:
        if alert.rule.permitted_response == PermittedResponse.REVIEW:
            key = f"incident:{alert.incident_id}" if alert.incident_id else f"alert:{alert.pk}"
            _open(run, ReviewTrigger.ALERT, key, now, alert=alert, incident=alert.incident,
                  detail={"rule": alert.rule.name, "alert": alert.pk, "component": alert.component, "step": alert.fired_step})
        for entry in [e for e in waiting if e.next_review.get("rule") == alert.rule.name]:
            if _open(run, ReviewTrigger.NEXT_REVIEW, f"entry:{entry.pk}", now, alert=alert, incident=alert.incident,
                     detail={"entry": entry.pk, "rule": alert.rule.name, "alert": alert.pk}) is not None:
                waiting.remove(entry)  # its review is open: a later alert of the rule finds it taken


def reviews_due_after_batch(sender, run, receipt, now, **kwargs):
    """alerts.signals.batch_evaluated: reviews due at the run's newest step (a schedule's or a decision's)."""
    step = run.last_step  # alerts/engine.py sets it on the run it passes (the row is written after the rules)
    if step is None:
        return
    schedule = ReviewSchedule.of(run)
    if schedule is not None and schedule.every_steps and not lifecycle.run_finished(run):
        due = (step // schedule.every_steps) * schedule.every_steps
        # Every later batch sees the same due step: a read answers it, not an insert refused by the constraint.
        if due > 0 and not Review.objects.filter(run=run, due_key=f"steps:{due}").exists():
            _open_scheduled(run, f"steps:{due}", now, detail={"every_steps": schedule.every_steps, "due_step": due})
    for entry in _waiting_entries(run, next_review__step__lte=step):
        _open(run, ReviewTrigger.NEXT_REVIEW, f"entry:{entry.pk}", now,
              detail={"entry": entry.pk, "step": entry.next_review["step"]})


def _waiting_entries(run, **trigger) -> list:
    """The run's log entries whose next-review trigger matches `trigger` and whose review has not opened yet.

    Evaluation asks this for every batch: most runs have no such entry, so that is one query.
    """
    entries = list(LogEntry.objects.filter(run=run, next_review__isnull=False, **trigger))
    if not entries:
        return []
    opened = set(Review.objects.filter(run=run, due_key__in=[f"entry:{e.pk}" for e in entries]).values_list("due_key", flat=True))
    return [e for e in entries if f"entry:{e.pk}" not in opened]


def open_due_reviews(now=None) -> int:
    """The periodic task's part: hourly schedules and next-review times that came due. Returns how many opened."""
    now = now or timezone.now()
    opened = 0
    hourly = ReviewSchedule.objects.filter(every_hours__isnull=False)
    projects = set(hourly.filter(run__isnull=True).values_list("project_id", flat=True))
    runs_with_own = set(ReviewSchedule.objects.filter(run__isnull=False).values_list("run_id", flat=True))
    sending = sending_runs(now)
    candidates = sending.filter(project_id__in=projects) | sending.filter(pk__in=hourly.filter(run__isnull=False).values("run_id"))
    for run in candidates.select_related("project").distinct():
        schedule = ReviewSchedule.of(run)
        if schedule is None or not schedule.every_hours or (run.pk in runs_with_own and schedule.run_id != run.pk):
            continue
        hours = (now - run.created_at).total_seconds() / 3600
        due = math.floor(hours / schedule.every_hours)
        if due >= 1:
            with transaction.atomic():
                # An evaluation of the run holds the lock: it may be opening the run's scheduled review; the next tick retries.
                if _holds_evaluation_lock(run) and _open_scheduled(
                        run, f"hours:{due * schedule.every_hours:g}", now,
                        detail={"every_hours": schedule.every_hours, "due_hours": due * schedule.every_hours}):
                    opened += 1
    for entry in LogEntry.objects.filter(next_review__has_key="at").select_related("run__project"):
        at = entry.next_review.get("at")
        if at and datetime.fromisoformat(at) <= now and not Review.objects.filter(run=entry.run, due_key=f"entry:{entry.pk}").exists():
            with transaction.atomic():
                if _open(entry.run, ReviewTrigger.NEXT_REVIEW, f"entry:{entry.pk}", now, detail={"entry": entry.pk, "at": at}):
                    opened += 1
    return opened
