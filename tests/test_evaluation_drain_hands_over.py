"""A task judging a run whose backlog outlasts its budget (alerts.tasks.DRAIN_SECONDS) queues the rest behind the
other runs' tasks instead of keeping its worker; the run's batches are still each judged once, oldest first.
The embedded console (eager, no worker) judges the whole backlog in one loop instead."""
import orjson
import pytest

from alerts import tasks
from alerts.tasks import evaluate_batch
from ingest.models import BatchReceipt


@pytest.mark.django_db
def test_a_drain_past_its_budget_queues_the_rest_and_every_batch_is_judged_in_order(sender, monkeypatch, settings,
                                                                                    django_capture_on_commit_callbacks):
    settings.EVALUATION_BATCHES_AT_ONCE = 1  # one batch an evaluation (tests/test_waiting_batches_judged_together.py)
    for b in range(4):
        with django_capture_on_commit_callbacks(execute=False):  # stored; their own tasks never queued
            body = orjson.dumps({"run": {"id": "backlog"}, "points": [{"step": b, "metric": "loss", "value": 1.0}]})
            response = sender.client.post("/api/v1/ingest", body, content_type="application/json",
                                          HTTP_AUTHORIZATION=f"Bearer {sender.token}")
        assert response.status_code == 202
    monkeypatch.setattr(tasks, "DRAIN_SECONDS", 0)  # every batch outlasts it
    monkeypatch.setitem(evaluate_batch.app.conf, "task_always_eager", False)  # as with a worker on Redis
    queued = []
    monkeypatch.setattr(tasks, "queue_evaluation", lambda receipt_id, **kw: queued.append(receipt_id) or True)

    receipts = list(BatchReceipt.objects.order_by("pk"))
    assert evaluate_batch(receipts[0].pk) is True
    for receipt_id in queued:  # the worker takes each handed-on task from the queue in turn
        assert evaluate_batch(receipt_id) is True
    assert queued == [r.pk for r in receipts[1:]]  # one batch a task, the next one handed on each time
    judged = list(BatchReceipt.objects.order_by("pk").values_list("evaluated_at", flat=True))
    assert None not in judged and judged == sorted(judged)


@pytest.mark.django_db
def test_the_embedded_console_drains_a_backlog_in_one_call_without_recursing(sender, monkeypatch,
                                                                            django_capture_on_commit_callbacks):
    for b in range(30):
        with django_capture_on_commit_callbacks(execute=False):
            body = orjson.dumps({"run": {"id": "backlog"}, "points": [{"step": b, "metric": "loss", "value": 1.0}]})
            sender.client.post("/api/v1/ingest", body, content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {sender.token}")
    monkeypatch.setattr(tasks, "DRAIN_SECONDS", 0)  # past its budget at once: with no worker, nothing to hand to
    queued = []
    monkeypatch.setattr(tasks, "queue_evaluation", lambda receipt_id, **kw: queued.append(receipt_id) or True)

    receipts = list(BatchReceipt.objects.order_by("pk"))
    assert tasks.drain_run(receipts[0].run_id) == [r.pk for r in receipts]
    assert queued == []
