"""With a real Celery worker on Redis: a `review` rule's alert opens its review in the worker's evaluation, and the
review's steps are filled by a task the worker runs after that evaluation commits."""
import pytest

from reviews.models import Review, ReviewStep
from tests.factories import make_rule
from tests.worker_support import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_the_worker_opens_and_fills_the_review_of_an_alert(celery_worker, sender, project):
    make_rule(project, "nonfinite-loss", kind="nonfinite", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, response="review")
    with celery_worker() as worker:
        points = [{"step": s, "metric": "loss", "value": "NaN" if s == 30 else 2.0} for s in range(50)]
        assert sender.post({"run": {"id": "r-worker"}, "points": points}).status_code == 202
        filled = lambda: ReviewStep.objects.filter(review__run__run_id="r-worker", number__lte=5, filled_at__isnull=False).count() == 5
        assert wait_until(filled, timeout=60), worker.output()[-3000:]
    review = Review.objects.get(run__run_id="r-worker")
    assert review.trigger == "alert" and review.alert.first_step == 30
    assert review.steps.get(number=2).state == "fail"  # the NaN, named in the hard invariants
    assert "fill_review_task" in worker.output()
