"""The reviews app's Celery tasks: fill a review's steps after its trigger commits, and open the reviews that came due."""
import logging

from celery import shared_task

from alerts.tasks import BROKER
from opsconsole.db import once_more_if_connection_lost
from reviews.models import Review, ReviewState, ReviewStep

log = logging.getLogger(__name__)


@shared_task(acks_late=True)
def fill_review_task(review_id):
    """Idempotent (fill_review claims the review under its row lock and fills it once), so a dropped database
    connection gets it run once more (opsconsole/db.py), as evaluation does."""
    return once_more_if_connection_lost(_fill_review, review_id)


def _fill_review(review_id):
    from reviews.lifecycle import fill_review

    review = Review.objects.filter(pk=review_id).select_related("run__project", "comparison").first()
    return bool(review) and fill_review(review)


def queue_fill(review_id) -> bool:
    """Hand the filling to a worker; with the broker down the periodic task fills it later."""
    from kombu.exceptions import OperationalError

    def send():
        fill_review_task.apply_async((review_id,), retry=False)
        return True

    if fill_review_task.app.conf.task_always_eager:
        return send()
    return BROKER.call(send, errors=(OperationalError, OSError, ConnectionError), fallback=False)


def review_opened(sender, review_id, **kwargs):
    """reviews.signals.review_opened: the new review's steps are filled by a worker (here and now when eager)."""
    queue_fill(review_id)


@shared_task
def open_due_reviews():
    """Periodic (Celery beat): reviews due by the hour or at a decision's next-review time, and any left unfilled."""
    from reviews.lifecycle import fill_review
    from reviews.triggers import open_due_reviews as open_due

    opened = open_due()
    unfilled = Review.objects.filter(state=ReviewState.OPEN).exclude(
        pk__in=ReviewStep.objects.filter(number=1, filled_at__isnull=False).values("review_id")
    ).select_related("run__project", "comparison")
    for review in unfilled[:100]:
        fill_review(review)
    return opened
