"""The review page: six steps in order with their states and evidence, checking a step, deciding; who sees what."""
import pytest

from ingest.models import Run
from reviews.models import LogEntry, Review
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(sender):
    points = [{"step": s, "metric": "loss", "value": 3.0 - s / 100} for s in range(30)]
    assert sender.post({"run": {"id": "r-page"}, "points": points}).status_code == 202
    return Run.objects.get(run_id="r-page")


def started(client):
    answer = client.post("/reviews/new/", {"run": "r-page"})
    assert answer.status_code == 302
    return Review.objects.get(), answer["Location"]


def test_starting_a_review_from_the_run_page_shows_the_six_steps_in_order(run, oncall):
    client = client_for(oncall)
    assert 'id="start-review"' in client.get("/runs/r-page/").content.decode()
    review, location = started(client)
    assert location == f"/reviews/{review.pk}/"
    page = client.get(location).content.decode()
    positions = [page.index(f'id="step-{n}"') for n in range(1, 7)]
    assert positions == sorted(positions)
    for title in ("1. Identity", "2. Hard invariants", "3. Expectation", "4. Slices", "5. Remaining value", "6. Decision"):
        assert title in page
    assert 'id="decision-form"' in page
    assert f"Review #{review.pk}" in client.get("/runs/r-page/").content.decode()


def test_a_viewer_reads_the_review_without_forms_and_an_outsider_gets_404(run, oncall, teammate, outsider):
    review, location = started(client_for(oncall))
    page = client_for(teammate).get(location).content.decode()
    assert 'id="step-1"' in page and 'id="decision-form"' not in page and "Checked</button>" not in page
    assert client_for(teammate).post("/reviews/new/", {"run": "r-page"}).status_code == 403
    assert client_for(outsider).get(location).status_code == 404
    assert 'id="start-review"' not in client_for(teammate).get("/runs/r-page/").content.decode()


def test_deciding_on_the_page_saves_the_entry_and_a_refused_form_names_the_field(run, oncall):
    client = client_for(oncall)
    review, location = started(client)
    refused = client.post(f"{location}decision/", {"decision": "terminate", "observation": "not converging",
                                                   "explanations": "lr too low"})
    assert refused.status_code == 400
    assert 'data-field="artifacts_preserved"' in refused.content.decode()
    assert not LogEntry.objects.exists()
    evidence_key = "1.0"
    done = client.post(f"{location}decision/", {"decision": "terminate", "observation": "not converging",
                                                "explanations": "lr too low\ndata exhausted", "artifacts_preserved": "on",
                                                "evidence": [evidence_key]})
    assert done.status_code == 302
    entry = LogEntry.objects.get()
    assert entry.decision == "terminate" and entry.explanations == ["lr too low", "data exhausted"]
    assert entry.links["evidence"] == [review.steps.get(number=1).evidence[0]]
    page = client.get(location).content.decode()
    assert 'data-decision="terminate"' in page and 'id="decision-form"' not in page


def test_checking_a_step_on_the_page_shows_who_checked_it(run, oncall):
    client = client_for(oncall)
    review, location = started(client)
    assert client.post(f"{location}steps/3/", {"note": "in band"}).status_code == 302
    page = client.get(location).content.decode()
    assert "Checked by omar" in page and "in band" in page
