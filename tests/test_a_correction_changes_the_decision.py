"""A correction can carry the corrected decision: a new entry naming the one it corrects (the original row stays
as it was), shown in the log as the decision that stands with a "corrected" mark, and handling the incidents the
original named. The rules of a decision hold for it (terminate: artifacts; a finished run: the acknowledgement)."""
import re

import pytest

from alerts.models import Alert
from ingest.models import Run
from reviews.models import LogEntry
from tests.factories import client_for, make_rule
from tests.review_support import open_review

pytestmark = pytest.mark.django_db


@pytest.fixture
def spike(sender, project):
    make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0})
    points = [{"step": s, "metric": "loss", "value": 20.0 if s in (21, 22) else 2.0} for s in range(40)]
    assert sender.post({"run": {"id": "spiked", "budget": {"steps": 1000}}, "points": points}).status_code == 202
    return Alert.objects.get()


def post_entry(client, **body):
    body = {"run": "spiked", "observation": "it was not a bad batch", "explanations": ["the data shard is corrupt"], **body}
    return client.post("/api/v1/decisions/", body, content_type="application/json")


def shown_decision(client, entry_id):
    page = client.get("/decisions/?run=spiked").content.decode()
    article = re.search(rf'<article[^>]*id="entry-{entry_id}".*?</article>', page, re.S).group(0)
    return article.split("</h3>")[0]


def test_a_correction_carries_the_corrected_decision_shown_in_the_log_as_corrected(owner, spike):
    client = client_for(owner)
    review = open_review("spiked", alert=spike)
    decided = client.post(f"/api/v1/reviews/{review.pk}/decision/", {
        "decision": "continue", "observation": "one spike", "explanations": ["a bad batch"]}, content_type="application/json")
    assert decided.status_code == 201, decided.content
    original = decided.json()["entry"]["id"]
    assert 'data-decision="continue"' in shown_decision(client, original)

    corrected = post_entry(client, corrects=original, decision="intervene", action="skip the shard")
    assert corrected.status_code == 201, corrected.content
    assert corrected.json()["decision"] == "intervene" and corrected.json()["corrects"] == original
    assert LogEntry.objects.get(pk=original).decision == "continue"  # append-only: the original row is untouched
    heading = shown_decision(client, original)
    assert 'data-decision="intervene"' in heading and "corrected" in heading and "was Continue" in heading
    review_page = client.get(f"/reviews/{review.pk}/").content.decode()
    assert 'data-decision="intervene"' in review_page and "corrected" in review_page


def test_a_corrected_decision_handles_the_incidents_the_note_named(owner, spike):
    client = client_for(owner)
    note = post_entry(client, observation="a spike", explanations=["unknown"], links={"incidents": [spike.incident_id]})
    assert note.status_code == 201, note.content
    spike.refresh_from_db()
    assert spike.reviewed_at is None  # a note is nobody's decision on the alert
    corrected = post_entry(client, corrects=note.json()["id"], decision="continue")
    assert corrected.status_code == 201, corrected.content
    assert corrected.json()["links"]["incidents"] == [spike.incident_id]
    spike.refresh_from_db()
    assert spike.reviewed_at is not None


def test_only_a_correction_carries_a_decision_and_a_decisions_rules_hold(owner, spike):
    client = client_for(owner)
    refused = post_entry(client, decision="continue")
    assert refused.status_code == 400 and [e["path"] for e in refused.json()["errors"]] == ["decision"]
    note = post_entry(client).json()["id"]
    terminate = post_entry(client, corrects=note, decision="terminate")
    assert terminate.status_code == 400 and [e["path"] for e in terminate.json()["errors"]] == ["artifacts_preserved"]
    Run.objects.filter(run_id="spiked").update(status="finished")
    intervene = post_entry(client, corrects=note, decision="intervene", action="skip the shard")
    assert intervene.status_code == 400 and [e["path"] for e in intervene.json()["errors"]] == ["run_finished_ok"]
    assert LogEntry.objects.count() == 1
    meant = post_entry(client, corrects=note, decision="intervene", action="skip the shard", run_finished_ok=True)
    assert meant.status_code == 201, meant.content


def test_the_console_form_writes_a_correction_with_its_decision(owner, spike):
    client = client_for(owner)
    note = post_entry(client).json()["id"]
    form = client.get(f"/decisions/?run=spiked&corrects={note}").content.decode()
    assert 'name="decision"' in form
    written = client.post("/decisions/new/", {"run": "spiked", "corrects": note, "decision": "terminate",
                                              "artifacts_preserved": "on", "observation": "the shard is corrupt",
                                              "explanations": "corrupt shard"})
    assert written.status_code == 302, written.content.decode()[:2000]
    assert 'data-decision="terminate"' in shown_decision(client, note)
