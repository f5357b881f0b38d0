"""Reviews through the API: opened by hand, steps checked, decided once; who may do what.

Members read; on-call and rule admins act; a viewer acting gets 403; anyone outside the project 404.
"""
import pytest

from ingest.models import Run
from reviews.models import LogEntry, Review, ReviewActivity
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(sender):
    points = [{"step": s, "metric": "loss", "value": 3.0 - s / 100} for s in range(50)]
    assert sender.post({"run": {"id": "r-api", "budget": {"steps": 1000}}, "points": points}).status_code == 202
    return Run.objects.get(run_id="r-api")


def start(client, run_id="r-api", **body):
    return client.post("/api/v1/reviews/", {"run": run_id, **body}, content_type="application/json")


def decide(client, review_id, **body):
    body = {"decision": "continue", "observation": "loss falls as its reference did", "explanations": ["on track"], **body}
    return client.post(f"/api/v1/reviews/{review_id}/decision/", body, content_type="application/json")


def test_an_on_call_member_opens_a_review_with_six_steps_filled_and_an_opened_row(run, oncall):
    answer = start(client_for(oncall))
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert [s["number"] for s in body["steps"]] == [1, 2, 3, 4, 5, 6]
    assert all(s["state"] for s in body["steps"][:5]) and body["steps"][5]["state"] is None
    assert body["trigger"] == "manual" and body["opened_by"] == "omar" and body["opened_step"] == 49
    assert [a["kind"] for a in body["activity"]] == ["opened", "filled"]


def test_a_viewer_may_read_but_not_open_check_or_decide(run, oncall, teammate):
    review_id = start(client_for(oncall)).json()["id"]
    viewer = client_for(teammate)
    assert viewer.get(f"/api/v1/reviews/{review_id}/").status_code == 200
    assert start(viewer).status_code == 403
    assert viewer.post(f"/api/v1/reviews/{review_id}/steps/1/", {}, content_type="application/json").status_code == 403
    assert decide(viewer, review_id).status_code == 403
    assert not LogEntry.objects.exists()


def test_outsiders_do_not_find_the_review_or_the_run(run, oncall, outsider):
    review_id = start(client_for(oncall)).json()["id"]
    other = client_for(outsider)
    assert other.get(f"/api/v1/reviews/{review_id}/").status_code == 404
    assert start(other).status_code == 404
    assert decide(other, review_id).status_code == 404
    assert other.get("/api/v1/reviews/").json() == {"reviews": []}


def test_checking_a_step_records_who_and_when_as_a_row(run, oncall):
    client = client_for(oncall)
    review_id = start(client).json()["id"]
    answer = client.post(f"/api/v1/reviews/{review_id}/steps/2/", {"note": "no NaN since the last review"}, content_type="application/json")
    assert answer.status_code == 200
    step = answer.json()["steps"][1]
    assert step["checked_by"] == "omar" and step["note"] == "no NaN since the last review" and step["checked_at"]
    assert ReviewActivity.objects.filter(review_id=review_id, kind="checked", step=2, by=oncall).count() == 1
    assert client.post(f"/api/v1/reviews/{review_id}/steps/6/", {}, content_type="application/json").json()["errors"][0]["path"] == "number"


def test_a_decision_writes_one_log_entry_and_the_review_is_decided_once(run, oncall):
    client = client_for(oncall)
    review = start(client).json()
    evidence = [next(e for s in review["steps"] for e in s["evidence"])]
    answer = decide(client, review["id"], evidence=evidence, next_review={"step": 500}, expected_next="loss below 2.4 by step 500")
    assert answer.status_code == 201, answer.content
    entry = answer.json()["entry"]
    assert entry["decision"] == "continue" and entry["review"] == review["id"] and entry["author"] == "omar"
    assert entry["links"]["evidence"] == evidence and entry["links"]["reviews"] == [review["id"]]
    assert entry["next_review"] == {"step": 500} and entry["step"] == 49
    assert entry["owner"] == "Pretrain on-call"  # the project's owner when none is given
    assert answer.json()["review"]["state"] == "decided"
    again = decide(client, review["id"], decision="terminate", artifacts_preserved=True)
    assert again.status_code == 400 and again.json()["errors"][0]["path"] == "review"
    assert LogEntry.objects.count() == 1


@pytest.mark.parametrize("body, field", [
    ({"decision": "terminate"}, "artifacts_preserved"),
    ({"decision": "intervene"}, "action"),
    ({"explanations": []}, "explanations"),
    ({"explanations": ["   "]}, "explanations"),
    ({"observation": ""}, "observation"),
    ({"next_review": {"step": 10}}, "next_review.step"),
    ({"next_review": {"at": "2001-01-01T00:00:00Z"}}, "next_review.at"),
    ({"next_review": {"rule": "no-such-rule"}}, "next_review.rule"),
    ({"evidence": [{"label": "elsewhere", "href": "https://example.com/"}]}, "links.evidence"),
    ({"links": {"alerts": [999999]}}, "links.alerts"),
    ({"decision": "stop"}, "decision"),
])
def test_a_decision_missing_what_it_needs_is_refused_naming_the_field(run, oncall, body, field):
    client = client_for(oncall)
    review_id = start(client).json()["id"]
    answer = decide(client, review_id, **body)
    assert answer.status_code == 400, answer.content
    paths = [e["path"] for e in answer.json()["errors"]]
    assert any(p == field or p.startswith((field + ".", field + "[")) for p in paths), answer.json()
    assert not LogEntry.objects.exists()
    assert Review.objects.get(pk=review_id).state == "open"


def test_terminate_confirmed_records_the_last_checkpoint_shown(sender, oncall):
    phases = [{"step": 0, "phase": "steady"}, {"step": 20, "phase": "checkpoint"}, {"step": 21, "phase": "steady"}]
    points = [{"step": s, "metric": "loss", "value": 3.0} for s in range(40)]
    assert sender.post({"run": {"id": "r-ckpt"}, "points": points, "phases": phases}).status_code == 202
    client = client_for(oncall)
    review_id = start(client, "r-ckpt").json()["id"]
    refused = decide(client, review_id, decision="terminate")
    assert "step 20" in refused.json()["errors"][0]["message"]
    entry = decide(client, review_id, decision="terminate", artifacts_preserved=True).json()["entry"]
    assert entry["artifacts_preserved"] is True and entry["last_checkpoint_step"] == 20


def test_the_comparison_run_can_be_chosen_and_the_steps_are_filled_again(run, sender, oncall):
    assert sender.post({"run": {"id": "r-other"}, "points": [{"step": 0, "metric": "loss", "value": 3.0}]}).status_code == 202
    client = client_for(oncall)
    review_id = start(client).json()["id"]
    answer = client.post(f"/api/v1/reviews/{review_id}/comparison/", {"run": "r-other"}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["comparison"] == "r-other"
    assert [a["kind"] for a in answer.json()["activity"]] == ["opened", "filled", "comparison", "filled"]
    itself = client.post(f"/api/v1/reviews/{review_id}/comparison/", {"run": "r-api"}, content_type="application/json")
    assert itself.status_code == 400 and itself.json()["errors"][0]["path"] == "run"
