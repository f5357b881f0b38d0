import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from alerts import engine
from alerts.silence import alert_silent_runs
from alerts.triage import sweep_mutes
from ingest.models import BatchReceipt, Run, RunStatus
from opsconsole.breaker import Breaker
from opsconsole.db import once_more_if_connection_lost
from opsconsole.live import collected, publish_status

log = logging.getLogger(__name__)


@shared_task(acks_late=True)
def evaluate_batch(receipt_id):
    """Evaluate one batch exactly once: claimed under a row lock, marked done in the same transaction.

    Idempotent, so a lost database connection gets it run once more (opsconsole/db.py).
    """
    return once_more_if_connection_lost(_evaluate_batch, receipt_id)


def _evaluate_batch(receipt_id):
    with transaction.atomic():
        receipt = (
            BatchReceipt.objects.select_for_update(skip_locked=True)
            .filter(pk=receipt_id, evaluated_at__isnull=True)
            .first()
        )
        if receipt is None:
            return False  # done already, or another worker holds it
        with collected():  # its live frames go out after commit, one message per batch
            engine.evaluate(receipt)
        BatchReceipt.objects.filter(pk=receipt.pk).update(evaluated_at=timezone.now())
    return True


@shared_task
def sweep_unevaluated(grace_seconds=10, limit=1000):
    """Queue batches whose evaluation was never queued or was lost (e.g. Redis was down)."""
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    ids = list(
        BatchReceipt.objects.filter(evaluated_at__isnull=True, received_at__lte=cutoff)
        .order_by("received_at")
        .values_list("pk", flat=True)[:limit]
    )
    queued = 0
    for receipt_id in ids:
        if not queue_evaluation(receipt_id, force=True):
            break  # the broker went away again: the next sweep takes the rest
        queued += 1
    alert_silent_runs()
    sweep_mutes()  # expired and unused mutes end and their alerts fire again; active ones cover what they should
    stalled_before = timezone.now() - timedelta(seconds=settings.RUN_STALLED_SECONDS)
    quiet = Run.objects.filter(status=RunStatus.HEALTHY, last_seen_at__lt=stalled_before)
    for run in quiet.only("pk", "project_id", "run_id", "last_step"):
        # One by one, so that each run that turned stalled (and only those) is announced live.
        if Run.objects.filter(pk=run.pk, status=RunStatus.HEALTHY).update(status=RunStatus.STALLED):
            publish_status(run, RunStatus.STALLED, RunStatus.HEALTHY)
    return queued


# With the broker down, one ingest finds out (the broker's transport options make that one quick attempt,
# settings.py) and the next ones skip it for a growing back-off: their batches are left to the sweep.
BROKER = Breaker("evaluation queue (Celery broker)", logger=log)


def queue_evaluation(receipt_id: int, *, force: bool = False) -> bool:
    """Hand the batch to the evaluation worker; True when queued. If the broker is down the sweep catches it later.

    `force` tries the broker even while the breaker has it down (the sweep runs in a worker, which has
    just heard from the broker).
    """
    from kombu.exceptions import OperationalError

    def send():
        evaluate_batch.apply_async((receipt_id,), retry=False)
        return True

    if evaluate_batch.app.conf.task_always_eager:
        return send()  # no broker: evaluated here and now
    queued = BROKER.call(send, errors=(OperationalError, OSError, ConnectionError), fallback=False, force=force)
    if not queued:
        log.info("batch %s is left to the sweep: the evaluation queue is unreachable", receipt_id)
    return queued


def queue_stored_batch(sender, receipt_id, **kwargs):
    """ingest.signals.batch_stored: evaluate what was stored (connected in AlertsConfig.ready)."""
    queue_evaluation(receipt_id)
