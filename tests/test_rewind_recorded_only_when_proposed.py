""""Record the proposed rewind" cannot be saved when no rewind was proposed: the API answers 400 naming
accept_rewind, the console hides the box and refuses a forged post; nothing is stored either way."""
import pytest

from reviews.models import LogEntry, Review
from tests.factories import client_for
from tests.review_support import open_review

pytestmark = pytest.mark.django_db


@pytest.fixture
def review(sender):
    points = [{"step": s, "metric": "loss", "value": 3.0 - s / 100} for s in range(50)]
    assert sender.post({"run": {"id": "calm"}, "points": points}).status_code == 202
    return open_review("calm")  # about no incident: nothing to rewind from


def test_the_api_refuses_to_record_a_rewind_nobody_proposed(owner, review):
    refused = client_for(owner).post(f"/api/v1/reviews/{review.pk}/decision/", {
        "decision": "intervene", "action": "lower the learning rate", "observation": "slow", "explanations": ["lr"],
        "accept_rewind": True}, content_type="application/json")
    assert refused.status_code == 400
    assert [e["path"] for e in refused.json()["errors"]] == ["accept_rewind"]
    assert not LogEntry.objects.exists()
    assert Review.objects.get().state == "open"


def test_the_console_hides_the_box_and_refuses_a_forged_tick(owner, review):
    client = client_for(owner)
    page = client.get(f"/reviews/{review.pk}/").content.decode()
    assert 'id="decision-form"' in page
    assert 'name="accept_rewind"' not in page and "Record the proposed rewind" not in page
    forged = client.post(f"/reviews/{review.pk}/decision/", {
        "decision": "intervene", "action": "lower the learning rate", "observation": "slow", "explanations": "lr",
        "accept_rewind": "on"})
    assert forged.status_code == 400
    assert 'data-field="accept_rewind"' in forged.content.decode()
    assert "no rewind was proposed" in forged.content.decode()
    assert not LogEntry.objects.exists()
    # Without the tick the same decision is saved.
    saved = client.post(f"/reviews/{review.pk}/decision/", {
        "decision": "intervene", "action": "lower the learning rate", "observation": "slow", "explanations": "lr"})
    assert saved.status_code == 302
    assert LogEntry.objects.get().rewind is None
