"""Ingest answers 202 and stores everything while the broker is down; the sweep evaluates what was missed."""
import pytest
from django.db import connection

from alerts.tasks import sweep_unevaluated
from ingest.models import BatchReceipt, Run
from opsconsole.celery import app as celery_app


@pytest.fixture
def broker_down():
    conf = celery_app.conf
    saved = conf.task_always_eager, conf.broker_url
    conf.task_always_eager = False
    conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    yield
    conf.task_always_eager, conf.broker_url = saved
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.mark.django_db
def test_ingest_stores_the_batch_when_the_broker_is_down_and_the_sweep_evaluates_it(sender, broker_down):
    body = {"run": {"id": "offline"}, "points": [{"step": s, "metric": "loss", "value": 1.0} for s in range(7)]}
    response = sender.post(body)
    assert response.status_code == 202
    assert len(sender.get("/api/v1/runs/offline/points/", metric="loss").json()["points"]) == 7
    receipt = BatchReceipt.objects.get()
    assert receipt.evaluated_at is None
    assert Run.objects.get().last_step is None  # evaluation has not run

    celery_app.conf.task_always_eager = True  # the broker is back (an eager stand-in for the worker)
    assert sweep_unevaluated(grace_seconds=0) == 1
    receipt.refresh_from_db()
    assert receipt.evaluated_at is not None
    assert Run.objects.get().last_step == 6
    assert sweep_unevaluated(grace_seconds=0) == 0  # nothing left, nothing evaluated twice


@pytest.mark.django_db
def test_evaluating_a_batch_twice_changes_nothing(sender):
    from alerts.tasks import evaluate_batch

    sender.post({"run": {"id": "twice"}, "points": [{"step": 3, "metric": "loss", "value": 1.0}]})
    receipt = BatchReceipt.objects.get()
    assert receipt.evaluated_at is not None
    assert evaluate_batch(receipt.pk) is False


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_batches_are_queued_on_redis_and_a_worker_evaluates_them(sender):
    from celery.contrib.testing.worker import start_worker

    conf = celery_app.conf
    conf.task_always_eager = False
    try:
        sender.post({"run": {"id": "queued"}, "points": [{"step": 11, "metric": "loss", "value": 1.0}]})
        assert BatchReceipt.objects.get().evaluated_at is None  # queued, not run inline
        connection.close()
        with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            import time

            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and BatchReceipt.objects.filter(evaluated_at__isnull=True).exists():
                time.sleep(0.1)
        assert BatchReceipt.objects.get().evaluated_at is not None
        assert Run.objects.get().last_step == 11
    finally:
        conf.task_always_eager = True
