"""Helpers for the retention, archive and deletion tests: a run with points and a fired alert, aged on demand."""
from datetime import timedelta

from django.utils import timezone

from ingest.models import BatchReceipt, Block, Rollup, Run
from reviews.models import LogEntry
from tests.factories import make_alert, make_rule


def send_points(sender, run_id, first_step=0, steps=300):
    """One batch of `steps` loss points on `run_id`."""
    points = [{"step": s, "metric": "loss", "value": 2.0 - s / 1000} for s in range(first_step, first_step + steps)]
    answer = sender.post({"run": {"id": run_id}, "points": points})
    assert answer.status_code in (200, 201, 202), answer.content
    return Run.objects.get(run_id=run_id)


def age(run, days):
    """Make the run's batches (and its last data) `days` old."""
    then = timezone.now() - timedelta(days=days)
    BatchReceipt.objects.filter(run=run).update(received_at=then)
    Run.objects.filter(pk=run.pk).update(last_seen_at=then)


def stored_points(run) -> int:
    return Block.objects.filter(series__run=run).count()


def stored_rollups(run) -> int:
    return Rollup.objects.filter(series__run=run).count()


def fired_alert(run):
    """An alert of a rule of the run's project on the run: the rule can no longer be deleted on its own (PROTECT)."""
    rule = run.project.rules.first() or make_rule(run.project, kind="nonfinite")
    return make_alert(rule, run=run)


def log_entry(run, **fields):
    return LogEntry.objects.create(project=run.project, run=run, observation="loss spike at 90", explanations=["bad batch"],
                                   owner="Pretrain on-call", at=timezone.now(), step=100, **fields)
