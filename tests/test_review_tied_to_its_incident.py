"""A review opened by hand can be about an incident of its run (the API's and the form's optional `incident`, a 400
naming it otherwise), shown on the review; every incident in the inbox, a `notify` rule's included, offers
"Review this incident", which opens its review or goes to the one already open."""
import re

import pytest

from alerts.models import Alert
from reviews.models import LogEntry, Review
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


def send(sender, run_id, values):
    points = [{"step": step, "metric": "loss", "value": value} for step, value in values]
    assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202


@pytest.fixture
def spikes(sender, project):
    """An incident on each of two runs, of a rule whose permitted response is only to notify."""
    make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0}, response="notify")
    for run_id in ("spiked", "other"):
        send(sender, run_id, [(s, 20.0 if s in (21, 22) else 2.0) for s in range(40)])
    return {a.run.run_id: a.incident for a in Alert.objects.select_related("run", "incident")}


def open_by_api(client, **body):
    return client.post("/api/v1/reviews/", {"run": "spiked", **body}, content_type="application/json")


def test_a_review_opened_through_the_api_is_about_the_incident_it_names(owner, spikes):
    client = client_for(owner)
    incident = spikes["spiked"]
    answer = open_by_api(client, incident=incident.pk)
    assert answer.status_code == 201, answer.content
    assert answer.json()["incident"] == incident.pk
    review = Review.objects.get(pk=answer.json()["id"])
    assert review.incident_id == incident.pk
    page = client.get(f"/reviews/{review.pk}/").content.decode()
    assert f'data-incident="{incident.pk}"' in page and f"incident #{incident.pk}" in page


@pytest.mark.parametrize("which", ["of another run", "that does not exist"])
def test_an_incident_not_of_the_run_is_a_400_naming_incident_and_nothing_opens(owner, spikes, which):
    incident_id = spikes["other"].pk if which == "of another run" else 10**9
    refused = open_by_api(client_for(owner), incident=incident_id)
    assert refused.status_code == 400
    assert [e["path"] for e in refused.json()["errors"]] == ["incident"]
    assert not Review.objects.exists()


def test_every_incident_in_the_inbox_offers_review_this_incident_and_it_goes_to_the_open_review(owner, spikes):
    client = client_for(owner)
    incident = spikes["spiked"]
    inbox = client.get("/inbox/?state=all").content.decode()
    form = re.search(rf'<form[^>]*id="review-incident-{incident.pk}".*?</form>', inbox, re.S)
    assert form is not None, "the notify rule's incident offers no review"
    assert "Review this incident" in form.group(0)
    assert f'name="incident" value="{incident.pk}"' in form.group(0)
    assert f'id="review-incident-{spikes["other"].pk}"' in inbox

    first = client.post("/reviews/new/", {"run": "spiked", "incident": incident.pk})
    review = Review.objects.get()
    assert first.status_code == 302 and first["Location"] == f"/reviews/{review.pk}/"
    assert review.incident_id == incident.pk and review.trigger == "manual"
    again = client.post("/reviews/new/", {"run": "spiked", "incident": incident.pk})
    assert again["Location"] == f"/reviews/{review.pk}/"
    assert Review.objects.count() == 1
    # Deciding it handles the incident, and the next "Review this incident" opens a fresh review.
    decided = client.post(f"/api/v1/reviews/{review.pk}/decision/", {"decision": "continue", "observation": "one bad batch",
                                                                      "explanations": ["a bad batch"]},
                          content_type="application/json")
    assert decided.status_code == 201, decided.content
    assert incident.pk in LogEntry.objects.get().links["incidents"]
    later = client.post("/reviews/new/", {"run": "spiked", "incident": incident.pk})
    assert Review.objects.count() == 2 and later["Location"] != f"/reviews/{review.pk}/"


def test_the_form_refuses_an_incident_of_another_run(owner, spikes):
    client = client_for(owner)
    answer = client.post("/reviews/new/", {"run": "spiked", "incident": spikes["other"].pk}, follow=True)
    assert not Review.objects.exists()
    assert f"no incident #{spikes['other'].pk} on run spiked" in answer.content.decode()
