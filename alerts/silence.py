"""Absence by the wall clock: a run that has sent nothing for T seconds (checked by the periodic sweep).

Gaps inside the data (missing steps, gaps in the points' own times) are judged
per batch in alerts/evaluation.py; this catches the run that sends nothing at
all. The alert is created at most once per silence (the open-alert constraint
guards concurrent sweeps) and resolved by the run's next evaluated batch.
"""
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from alerts.changes import record_change
from alerts.governance import judging_errors
from alerts.incidents import group_new_alerts
from alerts.models import Alert, AlertState, ChangeKind, Rule, RuleKind
from alerts.health import health_frame
from alerts.triage import apply_mutes
from ingest.models import Run, RunStatus
from opsconsole.live import publish_status

SILENT = "silent"


def alert_silent_runs(now=None) -> int:
    now = now or timezone.now()
    fired = 0
    for rule in Rule.objects.filter(kind=RuleKind.ABSENCE, enabled=True).select_related("project"):
        if judging_errors(kind=rule.kind, scope=rule.scope, persistence=rule.persistence, params=rule.params):
            continue  # stored before validation existed: its batches record it as broken; the others still sweep
        seconds = rule.params.get("seconds")
        if not seconds:
            continue
        wanted = rule.scope.get("runs") or {}
        quiet = (
            Run.objects.filter(project=rule.project, last_seen_at__lt=now - timedelta(seconds=seconds))
            .exclude(status=RunStatus.FINISHED)
            .exclude(alerts__rule=rule, alerts__component="", alerts__state__in=[AlertState.FIRING, AlertState.ACKNOWLEDGED, AlertState.MUTED])
        )
        for run in quiet:
            if not all((run.tags or {}).get(k) == v for k, v in wanted.items()):
                continue
            silent_for = (now - run.last_seen_at).total_seconds()
            try:
                with transaction.atomic():
                    step = run.last_step if run.last_step is not None else 0
                    alert = Alert.objects.create(
                        rule=rule, run=run, component="", metric="", condition=SILENT, first_step=step, last_step=step,
                        fired_step=step, magnitude=silent_for, magnitude_unit="seconds without data", fired_at=now,
                    )
                    record_change(alert, ChangeKind.FIRED, step=step, at=now, note=f"no data for {silent_for:.0f} s")
                    apply_mutes(alert, now)
                    group_new_alerts(run, now=now)
                    if Run.objects.filter(pk=run.pk).exclude(status=RunStatus.ALERTING).update(status=RunStatus.ALERTING):
                        publish_status(run, RunStatus.ALERTING, run.status, health=lambda run=run: health_frame(run))
                fired += 1
            except IntegrityError:
                continue  # another sweep fired it first
    return fired
