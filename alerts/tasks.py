import logging
import math
import time
from collections import OrderedDict
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from alerts import backtest_jobs, engine
from alerts.batches import waiting
from alerts.health import health_frame
from alerts.silence import alert_silent_runs
from alerts.triage import sweep_mutes
from ingest.models import BatchReceipt, Run, RunStatus
from opsconsole.breaker import Breaker
from opsconsole.db import once_more_if_connection_lost
from opsconsole import metrics
from opsconsole.live import collected, publish_status

log = logging.getLogger(__name__)


# A run's batches are judged one at a time, oldest first, under the run's evaluation lock; runs are judged in
# parallel. On PostgreSQL the lock is a transaction-level advisory lock keyed EVALUATION_LOCK_BASE + the run's
# pk: above the int4 range of ingest's hashtext(run id) keys (ingest/service.py), so never a run's ingest lock,
# and one key per run. SQLite's IMMEDIATE transactions serialize every writer anyway.
EVALUATION_LOCK_BASE = 1 << 40
# How long one task keeps judging its run before queueing the rest behind the other runs' tasks: a run sent
# faster than it is judged must not keep a worker from the others.
DRAIN_SECONDS = 0.5
BUSY = object()


@shared_task(acks_late=True)
def evaluate_batch(receipt_id):
    """Evaluate the batch's run up to and past it: each unevaluated batch of the run, oldest first.

    True when this call evaluated `receipt_id`; False when it was done already, or when another worker is
    judging the run (that worker looks again for the run's batches after it lets go, so this one is not
    left behind). Idempotent, so a lost database connection gets it run once more (opsconsole/db.py).
    """
    return once_more_if_connection_lost(_evaluate_batch, receipt_id)


# Batches this process has evaluated (committed) in the last EVALUATED_HERE_SECONDS, the newest
# EVALUATED_HERE_KEPT: a worker that falls behind judges a run's waiting batches together, and the tasks of all
# but the first then find their batch done, seconds later. An evaluated batch never becomes unevaluated, so this
# process answers those without asking the database; the time limit bounds what a database restored under a
# running worker (its batch numbers used again) could be kept waiting: until the sweep queues it again.
EVALUATED_HERE_KEPT = 20_000
EVALUATED_HERE_SECONDS = 60.0
_evaluated_here = OrderedDict()


def forget_evaluated():
    """Forget which batches this process evaluated (a test's database is flushed between tests)."""
    _evaluated_here.clear()


def _evaluate_batch(receipt_id):
    if time.monotonic() - _evaluated_here.get(receipt_id, -math.inf) < EVALUATED_HERE_SECONDS:
        return False
    run_pk = BatchReceipt.objects.filter(pk=receipt_id, evaluated_at__isnull=True).values_list("run_id", flat=True).first()
    if run_pk is None:
        return False  # done already: a task for an earlier batch of the run took it along
    return receipt_id in drain_run(run_pk)


def drain_run(run_pk: int) -> list[int]:
    """Evaluate the run's unevaluated batches in the order they were received; the ids evaluated.

    Each evaluation (the oldest batch, with those waiting behind it: alerts/batches.py) is its own transaction,
    so its frames go out as soon as it is judged. Stops when none is
    left, when another worker holds the run (it drains the rest), or after DRAIN_SECONDS, queueing the rest.
    """
    done = []
    # Eager (the embedded console): there is no other worker to hand the rest to, and "queueing" it would
    # judge it right here one call deeper; the drain just goes on.
    deadline = math.inf if evaluate_batch.app.conf.task_always_eager else time.monotonic() + DRAIN_SECONDS
    while True:
        evaluated = _evaluate_oldest(run_pk)
        if evaluated is BUSY:
            return done
        if evaluated is None:
            # The lock is let go now. A batch stored while we held it may have had its task find the run
            # busy and leave it to us: look once more, outside the lock.
            if not _unevaluated(run_pk).exists():
                return done
            continue
        done.extend(evaluated)
        if time.monotonic() >= deadline:
            rest = _unevaluated(run_pk).order_by("pk").values_list("pk", flat=True).first()
            if rest is not None:
                queue_evaluation(rest)  # to the back of the queue; if the broker is down the sweep takes it
            return done


def _unevaluated(run_pk):
    return BatchReceipt.objects.filter(run_id=run_pk, evaluated_at__isnull=True)


def _evaluate_oldest(run_pk):
    """The run's oldest unevaluated batches (alerts/batches.py waiting: the oldest, and those after it when
    several wait) evaluated and marked in one transaction: their ids, None, or BUSY."""
    with transaction.atomic():
        if not _try_lock_run(run_pk):
            return BUSY
        # pk order is arrival: ingest stores a run's batches one at a time
        oldest = list(_unevaluated(run_pk).order_by("pk")[:settings.EVALUATION_BATCHES_AT_ONCE])
        if not oldest:
            return None
        receipts = waiting(oldest)
        started = time.perf_counter()
        with collected():  # its live frames go out after commit, one message per batch
            engine.evaluate(receipts)
        ids = [r.pk for r in receipts]
        BatchReceipt.objects.filter(pk__in=ids).update(evaluated_at=timezone.now())
        elapsed = time.perf_counter() - started
    metrics.observe("evaluation_seconds", elapsed, project=_project_of(run_pk) if metrics.with_projects() else None)
    if not connection.in_atomic_block:  # committed (a caller's transaction could still roll them back)
        _evaluated_here.update(dict.fromkeys(ids, time.monotonic()))
        while len(_evaluated_here) > EVALUATED_HERE_KEPT:
            _evaluated_here.popitem(last=False)
    return ids


def _project_of(run_pk):
    return Run.objects.filter(pk=run_pk).values_list("project__slug", flat=True).first()


def _try_lock_run(run_pk: int) -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [EVALUATION_LOCK_BASE + int(run_pk)])
        return cursor.fetchone()[0]


@shared_task
def sweep_unevaluated(grace_seconds=10, limit=1000):
    """Queue the batches nobody holds (queue_unheld), then the minute's housekeeping; the number queued."""
    queued = queue_unheld(grace_seconds=grace_seconds, limit=limit)
    alert_silent_runs()
    sweep_mutes()  # expired and unused mutes end and their alerts fire again; active ones cover what they should
    stalled_before = timezone.now() - timedelta(seconds=settings.RUN_STALLED_SECONDS)
    quiet = Run.objects.filter(status=RunStatus.HEALTHY, last_seen_at__lt=stalled_before)
    for run in quiet.only("pk", "project_id", "run_id", "last_step"):
        # One by one, so that each run that turned stalled (and only those) is announced live.
        if Run.objects.filter(pk=run.pk, status=RunStatus.HEALTHY).update(status=RunStatus.STALLED):
            publish_status(run, RunStatus.STALLED, RunStatus.HEALTHY, health=lambda run=run: health_frame(run))
    return queued


# With the broker down, one ingest finds out (the broker's transport options make that one quick attempt,
# settings.py) and the next ones skip it for a growing back-off: their batches are left to the sweep.
BROKER = Breaker("evaluation queue (Celery broker)", logger=log)


@shared_task
def queue_unevaluated(grace_seconds=2, limit=1000):
    """Every EVALUATION_RECOVERY_SECONDS (beat): what the broker lost or never got is queued within seconds of its return."""
    return queue_unheld(grace_seconds=grace_seconds, limit=limit)


def queue_unheld(*, grace_seconds: float, limit: int) -> int:
    """Queue the unevaluated batches nobody holds, oldest first; the number queued.

    Nobody holds a batch that never reached the queue (unmarked: the broker was down, or its ingest process
    died before handing it over) or whose message must be lost: queued more than EVALUATION_REQUEUE_SECONDS
    ago, or before the broker's queues began (a Redis that came back empty, queues_began). Each batch taken
    is marked while its row is locked, and a concurrent sweep skips locked rows, so two sweeps over a queued
    backlog queue nothing twice.
    """
    began = queues_began()
    now = timezone.now()  # after `began`: what this sweep marks is on the current queue
    held_since = now - timedelta(seconds=settings.EVALUATION_REQUEUE_SECONDS)
    if began is not None and began > held_since:
        held_since = min(began, now)
    with transaction.atomic():
        ids = list(
            BatchReceipt.objects.filter(evaluated_at__isnull=True)
            .filter(Q(queued_at__isnull=True, received_at__lte=now - timedelta(seconds=grace_seconds))
                    | Q(queued_at__lt=held_since))
            .order_by("received_at")
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)[:limit]
        )
        BatchReceipt.objects.filter(pk__in=ids).update(queued_at=now)
    for n, receipt_id in enumerate(ids):
        if not queue_evaluation(receipt_id, force=True):
            # The broker went away again (queue_evaluation unmarked this one): the rest are nobody's, for the next sweep.
            BatchReceipt.objects.filter(pk__in=ids[n + 1:], evaluated_at__isnull=True).update(queued_at=None)
            return n
    return len(ids)


# The broker holds this key as long as it holds its queues, and the key says since when: a Redis that restarted
# without persistence comes back without it, and without every evaluation it had queued.
BROKER_MARK = "warninglight:evaluation-queues-began"


def queues_began():
    """When the broker's queues began; None without a Redis broker.

    The first sweep to find the key missing sets it to when Redis started: what was marked queued before
    then went with the old Redis, what was queued since is on the new one.
    """
    app = evaluate_batch.app
    url = app.conf.broker_url or ""
    if app.conf.task_always_eager or not url.startswith(("redis://", "rediss://", "unix://")):
        return None  # nothing is queued outside this process
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        raw = client.get(BROKER_MARK)
        if raw is None:
            # Redis counts its uptime in whole seconds of its own clock, so now - uptime may fall up to a second
            # before it really started, after a batch queued on the Redis that died: that batch would wait out
            # EVALUATION_REQUEUE_SECONDS. A second later (never past now) errs the other way: a batch queued in
            # the new Redis's first second may be queued twice, which its evaluation's claim makes harmless.
            now = timezone.now()
            started = min(now, now - timedelta(seconds=client.info("server")["uptime_in_seconds"] - 1))
            if client.set(BROKER_MARK, started.isoformat(), nx=True):
                log.warning("the evaluation queue began at %s (Redis started without the queue's data): "
                            "unevaluated batches queued before then are queued again", started.isoformat())
            raw = client.get(BROKER_MARK)
    except redis.RedisError:
        return None  # the broker is down: nothing can be queued now anyway
    finally:
        client.close()
    return datetime.fromisoformat(raw.decode()) if raw else None


def queue_evaluation(receipt_id: int, *, force: bool = False) -> bool:
    """Hand the batch to the evaluation worker; True when queued. If the broker is down the batch is
    unmarked (BatchReceipt.queued_at) and the next sweep queues it.

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
        BatchReceipt.objects.filter(pk=receipt_id, evaluated_at__isnull=True).update(queued_at=None)
    return queued


def queue_stored_batch(sender, receipt_id, **kwargs):
    """ingest.signals.batch_stored: evaluate what was stored (connected in AlertsConfig.ready)."""
    queue_evaluation(receipt_id)


def start_backtest(user, rule, runs, asked, compared_with=None):
    """Record a backtest job (alerts/backtest_jobs.py: who may, the project's limit) and queue it after the commit,
    so the worker finds the row; eager (embedded), it runs right here. The job as it stands afterwards."""
    job = backtest_jobs.start(user, rule, runs, asked, compared_with=compared_with)
    if not queue_backtest(job.pk):
        backtest_jobs.queue_failed(job)
    job.refresh_from_db()
    return job


@shared_task(acks_late=True)
def run_backtest(job_id):
    """Replay a backtest job within its budget (alerts/backtest_jobs.py); False when it was taken already."""
    return backtest_jobs.run(job_id)


def queue_backtest(job_id: int) -> bool:
    """Hand the job to a worker; False when the broker cannot be reached (the caller fails the job: nothing retries it)."""
    from kombu.exceptions import OperationalError

    def send():
        run_backtest.apply_async((job_id,), retry=False)
        return True

    if run_backtest.app.conf.task_always_eager:
        return send()  # no broker: replayed here and now
    return BROKER.call(send, errors=(OperationalError, OSError, ConnectionError), fallback=False)
