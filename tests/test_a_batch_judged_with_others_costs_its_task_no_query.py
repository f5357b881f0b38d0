"""A worker behind judges a run's waiting batches together; the tasks of the others then find their batch done.
The process that judged them answers those tasks without a query (a backlog's hundreds of them cost a worker
a round trip each), and a batch it has not judged is still looked up and judged."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from alerts import tasks
from ingest.models import BatchReceipt
from tests.factories import make_rule

pytestmark = pytest.mark.django_db(transaction=True)


def points(steps, bad=()):
    return [{"step": s, "metric": "grad_norm", "component": "layers.0", "value": "NaN" if s in bad else 1.0} for s in steps]


def test_the_tasks_of_batches_judged_together_cost_no_query(sender, project, monkeypatch):
    make_rule(project, kind="nonfinite", persistence={"points": 1, "resolve_points": 2})
    # Nothing judged as it is stored: the batches wait, as they do behind a busy worker.
    monkeypatch.setattr(tasks, "queue_evaluation", lambda receipt_id, **kwargs: True)
    for start in (0, 10, 20):
        sender.post({"run": {"id": "behind"}, "points": points(range(start, start + 10), bad={25})})
    first, second, third = BatchReceipt.objects.order_by("pk").values_list("pk", flat=True)
    assert BatchReceipt.objects.filter(evaluated_at__isnull=True).count() == 3

    assert tasks._evaluate_batch(first) is True  # judges the three together
    assert not BatchReceipt.objects.filter(evaluated_at__isnull=True).exists()
    with CaptureQueriesContext(connection) as queries:
        assert tasks._evaluate_batch(second) is False
        assert tasks._evaluate_batch(third) is False
    assert len(queries.captured_queries) == 0

    # Another worker process, or the same a minute later (a database restored under it may number batches
    # again): it asks the database, which says done.
    monkeypatch.setattr(tasks, "EVALUATED_HERE_SECONDS", 0.0)
    with CaptureQueriesContext(connection) as queries:
        assert tasks._evaluate_batch(second) is False
    tasks.forget_evaluated()
    monkeypatch.undo()
    with CaptureQueriesContext(connection) as queries2:
        assert tasks._evaluate_batch(third) is False
    assert len(queries.captured_queries) == len(queries2.captured_queries) == 1
