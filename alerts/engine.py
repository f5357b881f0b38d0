"""Evaluation of one stored batch: rules first, then the run's last step and status.

It must stay idempotent: the task claims the batch and marks it evaluated in
the same transaction, so a batch is judged once even if a worker dies.
"""
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from alerts import signals
from alerts.evaluation import evaluate_rules
from alerts.incidents import group_new_alerts
from ingest.models import Block, Run, RunStatus
from opsconsole.live import publish_points, publish_status


def evaluate(receipt):
    now = timezone.now()
    run = Run.objects.get(pk=receipt.run_id)
    if receipt.max_step is not None:
        run.last_step = max(run.last_step if run.last_step is not None else -1, receipt.max_step)
    # Live: the batch's points first (sent when this evaluation commits), then its alerts and the run's status.
    touched = Block.objects.filter(receipt=receipt).values_list("series__metric", "series__component")
    publish_points(run, receipt, touched.order_by("series__metric", "series__component").distinct())
    alerting = evaluate_rules(receipt, run)
    # The run's row is written only now, after the rules: an update holds the row's lock until evaluation
    # commits, and the run's next ingest (which saves the row) would wait out the whole evaluation behind it.
    updates = {"evaluated_at": now}
    if receipt.max_step is not None:
        updates["last_step"] = Greatest(Coalesce(F("last_step"), Value(-1)), Value(receipt.max_step))
    Run.objects.filter(pk=run.pk).update(**updates)
    budget_steps = (run.budget or {}).get("steps")
    if alerting:
        status = RunStatus.ALERTING
    elif budget_steps and run.last_step is not None and run.last_step >= budget_steps:
        status = RunStatus.FINISHED
    else:
        status = RunStatus.HEALTHY
    if Run.objects.filter(pk=run.pk).exclude(status=status).update(status=status):
        publish_status(run, status, run.status)
    group_new_alerts(run, receipt, now)  # the batch's new alerts into incidents (alerts/incidents.py)
    signals.batch_evaluated.send(sender=None, run=run, receipt=receipt, now=now)
