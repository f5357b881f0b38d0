"""Review schedules are settings: a project's (its rule admins) and a run's own (on-call too), from the API and the run page."""
import pytest

from ingest.models import Run
from reviews.models import ReviewSchedule
from tests.factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(project):
    return Run.objects.create(project=project, run_id="r-sched", max_step=10)


def put(client, **body):
    return client.put("/api/v1/review-schedules/", body, content_type="application/json")


def test_a_projects_schedule_is_set_by_its_rule_admins_only(run, owner, oncall, outsider):
    assert put(client_for(oncall), project="pretrain", every_steps=500).status_code == 403
    assert put(client_for(outsider), project="pretrain", every_steps=500).status_code == 404
    answer = put(client_for(owner), project="pretrain", every_steps=500, every_hours=6)
    assert answer.status_code == 200 and answer.json()["every_steps"] == 500 and answer.json()["run"] is None
    assert put(client_for(owner), project="pretrain", every_hours=2).json()["every_steps"] is None  # replaced, one row
    assert ReviewSchedule.objects.count() == 1
    assert client_for(oncall).get("/api/v1/review-schedules/?project=pretrain").json()["schedules"][0]["every_hours"] == 2


def test_a_runs_own_schedule_is_set_by_on_call_and_shown_on_its_page(run, oncall, teammate):
    client = client_for(oncall)
    assert "No review schedule" in client.get("/runs/r-sched/").content.decode()
    done = client.post("/reviews/schedule/", {"run": "r-sched", "every_steps": "2000"})
    assert done.status_code == 302
    assert ReviewSchedule.objects.get(run=run).every_steps == 2000
    page = client.get("/runs/r-sched/").content.decode()
    assert "Reviews of this run open every 2,000 steps." in page and "every 2000 steps (this run's schedule)" in page
    assert client_for(teammate).post("/reviews/schedule/", {"run": "r-sched", "every_steps": "5"}).status_code == 403


def test_a_schedule_without_steps_or_hours_is_refused_naming_the_field(run, owner):
    answer = put(client_for(owner), project="pretrain", run="r-sched")
    assert answer.status_code == 400 and answer.json()["errors"][0]["path"] == "every_steps"
    page = client_for(owner).post("/reviews/schedule/", {"run": "r-sched", "every_steps": "", "every_hours": ""}, follow=True)
    assert "every_steps: give every_steps, every_hours or both" in page.content.decode()
    assert not ReviewSchedule.objects.exists()
