"""A review about an incident proposes a rewind (the PaLM practice) and an intervene decision can record it."""
import pytest

from reviews.models import LogEntry, Review
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident_review(sender, project):
    make_rule(project, "nonfinite-loss", kind="nonfinite", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, response="review")
    phases = [{"step": 0, "phase": "steady"}]
    for ckpt in (100, 200, 300):
        phases += [{"step": ckpt, "phase": "checkpoint"}, {"step": ckpt + 1, "phase": "steady"}]
    points = [{"step": s, "metric": "loss", "value": "NaN" if s == 350 else 3.0 - s / 1000} for s in range(400)]
    assert sender.post({"run": {"id": "r-rewind"}, "points": points, "phases": phases}).status_code == 202
    return Review.objects.get(run__run_id="r-rewind")


def test_the_review_page_proposes_the_checkpoint_a_hundred_steps_before_the_onset(incident_review, oncall):
    page = client_for(oncall).get(f"/reviews/{incident_review.pk}/").content.decode()
    assert 'id="rewind-proposal"' in page
    assert "Rewind to the checkpoint at step 200, at least 100 steps before the onset at step 350: 199 steps redone" in page
    assert "100 more than rewinding to step 300, the last checkpoint before the alert" in page
    assert "skip the batches of steps 201-350" in page


def test_an_intervene_decision_records_the_proposed_rewind(incident_review, oncall):
    answer = client_for(oncall).post(f"/api/v1/reviews/{incident_review.pk}/decision/", {
        "decision": "intervene", "observation": "NaN loss at 350", "explanations": ["a bad batch", "fp16 overflow"],
        "action": "rewind to step 200 and skip the batches of steps 201-350", "accept_rewind": True,
    }, content_type="application/json")
    assert answer.status_code == 201, answer.content
    entry = LogEntry.objects.get()
    assert entry.rewind["checkpoint_step"] == 200 and entry.rewind["skip_batches"] == {"from_step": 201, "to_step": 350, "count": 150}
    assert entry.links["incidents"] == [incident_review.incident_id]
    log = client_for(oncall).get("/decisions/?run=r-rewind").content.decode()
    assert "Rewind to the checkpoint at step 200" in log
