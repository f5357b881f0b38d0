"""With a real Celery worker on Redis, delivery happens off the ingest path: ingest answers while the receiver is
still holding the message, and a 5xx is retried by a task queued with its back-off."""
import threading

import pytest

from notifications.models import Delivery
from tests.notify_support import fire, make_channel, spike_rule
from tests.worker_support import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def test_ingest_answers_while_the_worker_delivers_and_retries(celery_worker, sender, project, receiver):
    spike_rule(project)
    channel = make_channel(project, url=receiver.url)
    receiver.statuses = [503]
    receiver.hold = threading.Event()  # the receiver answers nothing until the test lets it
    with celery_worker(NOTIFY_RETRY_SECONDS=1) as worker:
        fire(sender, run_id="run-w")  # answered (202) with the message not yet delivered anywhere
        assert wait_until(lambda: len(receiver.requests) == 1, timeout=60), worker.output()[-3000:]
        receiver.hold.set()
        delivered = lambda: Delivery.objects.filter(channel=channel, status="ok").exists()
        assert wait_until(delivered, timeout=60), worker.output()[-3000:]
    assert list(Delivery.objects.filter(channel=channel).order_by("id").values_list("attempt", "status", "status_code")) == [
        (1, "retrying", 503), (2, "ok", 200)]
    assert [b["run_id"] for b in receiver.bodies()] == ["run-w", "run-w"]
    assert "notifications.tasks.deliver" in worker.output()
