"""A task judging a run whose backlog outlasts its budget (alerts.tasks.DRAIN_SECONDS) queues the rest behind the
other runs' tasks instead of keeping its worker; the run's batches are still each judged once, oldest first."""
import orjson
import pytest

from alerts import tasks
from alerts.tasks import evaluate_batch
from ingest.models import BatchReceipt


@pytest.mark.django_db
def test_a_drain_past_its_budget_queues_the_rest_and_every_batch_is_judged_in_order(sender, monkeypatch,
                                                                                    django_capture_on_commit_callbacks):
    for b in range(4):
        with django_capture_on_commit_callbacks(execute=False):  # stored; their own tasks never queued
            body = orjson.dumps({"run": {"id": "backlog"}, "points": [{"step": b, "metric": "loss", "value": 1.0}]})
            response = sender.client.post("/api/v1/ingest", body, content_type="application/json",
                                          HTTP_AUTHORIZATION=f"Bearer {sender.token}")
        assert response.status_code == 202
    monkeypatch.setattr(tasks, "DRAIN_SECONDS", 0)  # every batch outlasts it
    queued = []
    real_queue = tasks.queue_evaluation
    monkeypatch.setattr(tasks, "queue_evaluation", lambda receipt_id, **kw: queued.append(receipt_id) or real_queue(receipt_id, **kw))

    receipts = list(BatchReceipt.objects.order_by("pk"))
    assert evaluate_batch(receipts[0].pk) is True
    assert queued == [r.pk for r in receipts[1:]]  # one batch a task, the next one handed on each time (eager here)
    judged = list(BatchReceipt.objects.order_by("pk").values_list("evaluated_at", flat=True))
    assert None not in judged and judged == sorted(judged)
