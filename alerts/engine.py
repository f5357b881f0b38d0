"""Evaluation of one stored batch.

For now it advances the run's last evaluated step and its status; rules and
alerts plug in here. It must stay idempotent: evaluating the same batch twice
changes nothing the second time.
"""
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from ingest.models import Run, RunStatus


def evaluate(receipt):
    now = timezone.now()
    updates = {"evaluated_at": now}
    if receipt.max_step is not None:
        updates["last_step"] = Greatest(Coalesce(F("last_step"), Value(-1)), Value(receipt.max_step))
    Run.objects.filter(pk=receipt.run_id).update(**updates)
    run = Run.objects.get(pk=receipt.run_id)
    budget_steps = (run.budget or {}).get("steps")
    if budget_steps and run.last_step is not None and run.last_step >= budget_steps:
        status = RunStatus.FINISHED
    else:
        status = RunStatus.HEALTHY
    # Conditional update: a run already marked alerting by a rule keeps that state.
    Run.objects.filter(pk=run.pk).exclude(status__in=[status, RunStatus.ALERTING]).update(status=status)
