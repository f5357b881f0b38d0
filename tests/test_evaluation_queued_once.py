"""A batch is queued for evaluation once: the sweeps take only batches nobody holds, so a backlog never grows the queue.

Ingest marks each batch queued as it hands it to Redis; the sweeps (the 2-second
one and the minute's) queue a batch only when it never reached the queue or its
message must have been lost. Messages are counted on a redis-server of the
test's own.
"""
import json
import threading
import time
from datetime import timedelta

import pytest
from django.db import close_old_connections, connection
from django.utils import timezone

from alerts.tasks import queue_unevaluated, queues_began, sweep_unevaluated
from ingest.models import BatchReceipt
from opsconsole.celery import app as celery_app
from tests.worker_support import own_redis  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def batch(run_id, step):
    return {"run": {"id": run_id}, "points": [{"step": step, "metric": "loss", "value": 1.0}]}


def queued_batches(server):
    """The receipt ids of the evaluations waiting on the broker's queue, one entry per message."""
    messages = [json.loads(raw) for raw in server.client().lrange("celery", 0, -1)]
    return sorted(int(m["headers"]["argsrepr"].strip("(),")) for m in messages
                  if m["headers"]["task"] == "alerts.tasks.evaluate_batch")


@pytest.fixture
def no_worker(own_redis):  # noqa: F811
    """Batches are queued on the test's own Redis and nobody consumes them: a backlog."""
    server = own_redis()
    celery_app.conf.task_always_eager = False
    # Beat's light sweep marks when a new Redis began within seconds of its start. Marked lazily, the mark is
    # Redis's uptime in whole seconds back, so a batch queued in its first second could be queued once more.
    time.sleep(1.1)
    queues_began()
    yield server
    celery_app.conf.task_always_eager = True


def test_sweeping_a_queued_backlog_twice_queues_nothing_more(sender, no_worker):
    for step in range(30):
        assert sender.post(batch(f"run-{step % 3}", step)).status_code == 202
    backlog = sorted(BatchReceipt.objects.values_list("pk", flat=True))
    assert queued_batches(no_worker) == backlog

    assert sweep_unevaluated(grace_seconds=0) == 0
    assert sweep_unevaluated(grace_seconds=0) == 0
    assert queue_unevaluated(grace_seconds=0) == 0
    assert queued_batches(no_worker) == backlog  # 30 messages for 30 batches, however often the sweeps run


def test_a_batch_whose_message_was_lost_long_ago_is_queued_again_once(sender, no_worker, settings):
    for step in range(6):
        sender.post(batch("lost", step))
    lost = list(BatchReceipt.objects.order_by("pk").values_list("pk", flat=True)[:2])
    no_worker.client().delete("celery")  # every message gone; two of the batches were queued long ago
    long_ago = timezone.now() - timedelta(seconds=settings.EVALUATION_REQUEUE_SECONDS + 1)
    BatchReceipt.objects.filter(pk__in=lost).update(queued_at=long_ago)

    assert sweep_unevaluated(grace_seconds=0) == 2
    assert sweep_unevaluated(grace_seconds=0) == 0
    assert queued_batches(no_worker) == lost  # the other four are still someone's for their 10 minutes


def test_two_sweeps_at_once_over_an_unqueued_backlog_queue_each_batch_once(sender, no_worker):
    for step in range(200):
        sender.post(batch(f"run-{step % 5}", step))
    no_worker.client().delete("celery")
    BatchReceipt.objects.update(queued_at=None)  # as if the broker had been down while they arrived
    results, start = [], threading.Barrier(2)

    def sweep():
        try:
            start.wait()
            results.append(sweep_unevaluated(grace_seconds=0))
        finally:
            close_old_connections()
            connection.close()

    sweepers = [threading.Thread(target=sweep) for _ in range(2)]
    for t in sweepers:
        t.start()
    for t in sweepers:
        t.join()
    assert sorted(queued_batches(no_worker)) == sorted(BatchReceipt.objects.values_list("pk", flat=True))
    assert sum(results) == 200


def test_a_batch_the_broker_never_got_is_queued_by_the_next_light_sweep(sender, no_worker):
    sender.post(batch("offline", 1))
    no_worker.crash()
    sender.post(batch("offline", 2))  # answered 202; its hand-over failed, so it is nobody's
    never_got = BatchReceipt.objects.get(min_step=2)
    assert never_got.queued_at is None
    no_worker.start()

    assert queue_unevaluated(grace_seconds=0) == 2  # both: Redis came back empty, and the other's message went with it
    assert queue_unevaluated(grace_seconds=0) == 0
    assert sorted(queued_batches(no_worker)) == sorted(BatchReceipt.objects.values_list("pk", flat=True))
