"""Several senders writing disjoint step ranges of one run: a gap another batch filled is not a gap.

Batches of one run may be stored and evaluated in any order. The starter
pack's `missing-data` rule judges a step gap against every batch the run holds
when the batch is evaluated; a gap it alerted stays open until batches fill it
(then it resolves), so a batch that is really lost stays alerted.
"""
import orjson
import pytest

from alerts.starter import install_starter_pack
from alerts.tasks import evaluate_batch
from ingest.models import BatchReceipt, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def starter(project):
    install_starter_pack(project)


def loss(lo, hi):
    return [{"step": s, "metric": "loss", "value": 3.0 - 0.0001 * s} for s in range(lo, hi)]


def missing_data(sender, run_id):
    return [a for a in sender.get("/api/v1/alerts/", run=run_id).json()["results"] if a["rule"]["name"] == "missing-data"]


def changes(sender, alert):
    return [(c["kind"], c["step"]) for c in sender.get(f"/api/v1/alerts/{alert['id']}/").json()["changes"]]


def test_batches_stored_before_their_evaluation_fill_each_others_gaps(sender, starter, django_capture_on_commit_callbacks):
    # Two senders, interleaved: A writes 0-99 and 200-299, B writes 100-199 and 300-399; a worker
    # evaluates them after all four are stored, in the order they arrived.
    for lo in (0, 200, 100, 300):
        with django_capture_on_commit_callbacks(execute=False):
            body = orjson.dumps({"run": {"id": "two-senders"}, "points": loss(lo, lo + 100)})
            response = sender.client.post("/api/v1/ingest", body, content_type="application/json",
                                          HTTP_AUTHORIZATION=f"Bearer {sender.token}")
        assert response.status_code == 202
    # The first batch's task evaluates the run's unevaluated batches, oldest first (alerts/tasks.py).
    assert evaluate_batch(BatchReceipt.objects.order_by("id").first().pk) is True
    assert not BatchReceipt.objects.filter(evaluated_at__isnull=True).exists()
    assert missing_data(sender, "two-senders") == []
    assert Run.objects.get(run_id="two-senders").status == "healthy"


def test_a_gap_alerted_before_the_other_sender_filled_it_resolves_when_filled(sender, starter):
    # Evaluated as each batch arrives: A's second range is judged before B's first range exists.
    sender.post({"run": {"id": "race"}, "points": loss(0, 100)})
    sender.post({"run": {"id": "race"}, "points": loss(200, 300)})
    [alert] = missing_data(sender, "race")
    assert (alert["state"], alert["step"], alert["magnitude"], alert["magnitude_unit"]) == ("firing", 200, 100.0, "missing steps")
    assert Run.objects.get(run_id="race").status == "alerting"

    sender.post({"run": {"id": "race"}, "points": loss(100, 200)})  # B fills the gap
    [alert] = missing_data(sender, "race")
    assert alert["state"] == "resolved"
    assert changes(sender, alert) == [("fired", 200), ("resolved", 100)]
    sender.post({"run": {"id": "race"}, "points": loss(300, 400)})
    assert [a["state"] for a in missing_data(sender, "race")] == ["resolved"]
    assert Run.objects.get(run_id="race").status == "healthy"


def test_a_gap_half_filled_stays_alerted(sender, starter):
    sender.post({"run": {"id": "half"}, "points": loss(0, 100)})
    sender.post({"run": {"id": "half"}, "points": loss(200, 300)})
    sender.post({"run": {"id": "half"}, "points": loss(100, 150)})  # 150-199 never arrive
    sender.post({"run": {"id": "half"}, "points": loss(300, 400)})
    [alert] = missing_data(sender, "half")
    assert (alert["state"], alert["step"], alert["magnitude"]) == ("firing", 200, 100.0)
    assert Run.objects.get(run_id="half").status == "alerting"


def test_a_lost_batch_stays_alerted_while_later_batches_arrive(sender, starter):
    sender.post({"run": {"id": "lost"}, "points": loss(0, 100)})
    sender.post({"run": {"id": "lost"}, "points": loss(200, 300)})  # 100-199 are lost
    sender.post({"run": {"id": "lost"}, "points": loss(300, 400)})
    [alert] = missing_data(sender, "lost")
    assert (alert["state"], alert["step"], alert["magnitude"]) == ("firing", 200, 100.0)
    assert changes(sender, alert) == [("fired", 200)]


def test_a_gap_before_a_range_stored_earlier_is_found_by_the_late_batch(sender, starter):
    # B's range arrives first; A's 0-49 arrives later and its 50-99 never does.
    sender.post({"run": {"id": "late-side"}, "points": loss(100, 200)})
    sender.post({"run": {"id": "late-side"}, "points": loss(0, 50)})
    [alert] = missing_data(sender, "late-side")
    # Reported at the evaluated batch's step next to the gap: its other side was stored before.
    assert (alert["state"], alert["step"], alert["magnitude"]) == ("firing", 49, 50.0)
