"""Intervene and terminate on a finished run are accepted only with an explicit acknowledgement: the API answers
400 naming run_finished_ok, the console's form warns and asks for a tick; continue and running runs are unaffected."""
import pytest

from ingest.models import Run
from reviews.models import LogEntry
from tests.factories import client_for
from tests.review_support import open_review

pytestmark = pytest.mark.django_db

BODIES = {
    "intervene": {"decision": "intervene", "action": "rewind to step 40"},
    "terminate": {"decision": "terminate", "artifacts_preserved": True},
}


def finished_run(sender, run_id="done", budget=49):
    points = [{"step": s, "metric": "loss", "value": 3.0 - s / 100} for s in range(50)]
    assert sender.post({"run": {"id": run_id, "budget": {"steps": budget}}, "points": points}).status_code == 202
    return Run.objects.get(run_id=run_id)


def decide(client, review, **body):
    body = {"observation": "the loss stopped falling", "explanations": ["over-fit"], **body}
    return client.post(f"/api/v1/reviews/{review.pk}/decision/", body, content_type="application/json")


@pytest.mark.parametrize("decision", ["intervene", "terminate"])
def test_the_api_refuses_intervene_or_terminate_on_a_finished_run_without_the_acknowledgement(sender, owner, decision):
    run = finished_run(sender)
    assert run.status == "finished"
    review = open_review("done")
    client = client_for(owner)
    refused = decide(client, review, **BODIES[decision])
    assert refused.status_code == 400
    assert [e["path"] for e in refused.json()["errors"]] == ["run_finished_ok"]
    assert "has finished" in refused.json()["errors"][0]["message"]
    assert not LogEntry.objects.exists()
    accepted = decide(client, review, run_finished_ok=True, **BODIES[decision])
    assert accepted.status_code == 201, accepted.content
    assert LogEntry.objects.get().decision == decision


def test_continue_on_a_finished_run_and_intervene_on_a_running_one_need_no_acknowledgement(sender, owner):
    finished_run(sender)
    finished_run(sender, "running", budget=1000)
    client = client_for(owner)
    assert decide(client, open_review("done"), decision="continue").status_code == 201
    assert decide(client, open_review("running"), **BODIES["intervene"]).status_code == 201


def test_the_console_form_warns_and_asks_for_the_tick_on_a_finished_run(sender, owner):
    finished_run(sender)
    finished_run(sender, "running", budget=1000)
    client = client_for(owner)
    review = open_review("done")
    assert client.get(f"/reviews/{review.pk}/").status_code == 200
    page = client.get(f"/reviews/{review.pk}/").content.decode()
    assert 'id="finished-warning"' in page and "This run has finished" in page
    assert 'name="run_finished_ok"' in page
    running = client.get(f"/reviews/{open_review('running').pk}/").content.decode()
    assert 'id="finished-warning"' not in running and 'name="run_finished_ok"' not in running

    form = {"decision": "terminate", "observation": "the loss stopped falling", "explanations": "over-fit",
            "owner": "olivia", "artifacts_preserved": "on"}
    refused = client.post(f"/reviews/{review.pk}/decision/", form)
    assert refused.status_code == 400
    assert 'data-field="run_finished_ok"' in refused.content.decode()
    assert not LogEntry.objects.exists()
    accepted = client.post(f"/reviews/{review.pk}/decision/", {**form, "run_finished_ok": "on"})
    assert accepted.status_code == 302
    assert LogEntry.objects.get().decision == "terminate"


@pytest.mark.parametrize(("decision", "article"), [("intervene", "an"), ("terminate", "a")])
def test_the_forms_refusal_reads_as_words(sender, owner, decision, article):
    # It once read "… record a intervene decision on a finished run (run_finished_ok: true)": the API's field
    # name, shown to a person beside the tick box it names.
    import re

    finished_run(sender)
    review = open_review("done")
    form = {"observation": "the loss stopped falling", "explanations": "over-fit", "owner": "olivia",
            **{k: ("on" if v is True else v) for k, v in BODIES[decision].items()}}
    refused = client_for(owner).post(f"/reviews/{review.pk}/decision/", form)
    assert refused.status_code == 400
    html = refused.content.decode()
    errors = re.sub(r"<[^>]+>", " ", html[html.index('id="decision-errors"'):html.index("</div>", html.index('id="decision-errors"'))])
    assert "has finished" in errors
    assert "run_finished_ok" not in errors and ": true" not in errors
    assert f"record {article} {decision} decision" in errors
