"""Evaluation of one stored batch: rules first, then the run's last step and status.

It must stay idempotent: the task claims the batch and marks it evaluated in
the same transaction, so a batch is judged once even if a worker dies.
"""
from collections import defaultdict

from django.utils import timezone

from alerts import signals
from alerts.batches import Batches
from alerts.evaluation import evaluate_rules
from alerts.health import health_frame
from alerts.incidents import group_new_alerts
from ingest.models import Block, Run, RunStatus
from opsconsole.live import publish_points, publish_status


def evaluate(receipts):
    """Judge one stored batch, or several of one run in arrival order (alerts/batches.py), as one evaluation."""
    batches = Batches.of(receipts)
    receipt = batches.latest
    now = timezone.now()
    run = Run.objects.get(pk=receipt.run_id)
    if batches.max_step is not None:
        run.last_step = max(run.last_step if run.last_step is not None else -1, batches.max_step)
    # Live: each batch's points first (sent when this evaluation commits), then its alerts and the run's status.
    touched = defaultdict(list)
    rows = Block.objects.filter(receipt_id__in=batches.ids).values_list("receipt_id", "series__metric", "series__component")
    for receipt_id, metric, component in rows.order_by("receipt_id", "series__metric", "series__component").distinct():
        touched[receipt_id].append((metric, component))
    for each in batches.receipts:
        publish_points(run, each, touched[each.pk])
    alerting = evaluate_rules(batches, run)
    budget_steps = (run.budget or {}).get("steps")
    if alerting:
        status = RunStatus.ALERTING
    elif budget_steps and run.last_step is not None and run.last_step >= budget_steps:
        status = RunStatus.FINISHED
    else:
        status = RunStatus.HEALTHY
    if status != run.status:
        publish_status(run, status, run.status, health=lambda: health_frame(run))  # a frame, sent when this evaluation commits
    group_new_alerts(run, receipt, now, receipts=batches.receipts)  # the new alerts into incidents (alerts/incidents.py)
    signals.batch_evaluated.send(sender=None, run=run, receipt=receipt, receipts=batches.receipts, now=now)
    # The run's row is written once, last: an update holds the row's lock until evaluation commits, and the
    # run's next ingest (which saves the row) would otherwise wait out the evaluation behind it. The run's
    # batches are judged one at a time under its evaluation lock (alerts/tasks.py), so what was read is current.
    Run.objects.filter(pk=run.pk).update(evaluated_at=now, last_step=run.last_step, status=status)
