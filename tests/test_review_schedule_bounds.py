"""Review schedules cannot flood a run with reviews, and can be removed.

`every_hours: 0.01` used to open a review on every beat tick (stalled runs included, forever) and
`every_steps: 1` one per batch; a schedule set could not be removed (PUT with nulls was a 400, no DELETE).
Now each figure has a floor (a 400 naming the field), a run that stopped sending or finished gets no
scheduled review, a run has at most one open scheduled review, and DELETE, PUT or PATCH with nulls and the
run page's button remove a schedule.
"""
from datetime import timedelta

import pytest
from django.utils import timezone

from ingest.models import Run, RunStatus
from reviews.lifecycle import decide
from reviews.models import Review, ReviewSchedule
from reviews.triggers import open_due_reviews
from tests.factories import client_for

pytestmark = pytest.mark.django_db

URL = "/api/v1/review-schedules/"
MIN_EVERY_STEPS, MIN_EVERY_HOURS = 100, 1.0  # the floors, as docs and the 400s state them


def put(client, **body):
    return client.put(URL, body, content_type="application/json")


def patch(client, query, **body):
    return client.patch(URL + query, body, content_type="application/json")


def error_paths(answer):
    return [e["path"] for e in answer.json()["errors"]]


@pytest.fixture
def run(project):
    return Run.objects.create(project=project, run_id="r-bounds", max_step=10, last_seen_at=timezone.now())


@pytest.mark.parametrize(("body", "field"), [
    ({"every_steps": 1}, "every_steps"),
    ({"every_steps": MIN_EVERY_STEPS - 1}, "every_steps"),
    ({"every_hours": 0.01}, "every_hours"),
    ({"every_hours": MIN_EVERY_HOURS - 0.001}, "every_hours"),
    ({"every_steps": 5000, "every_hours": 0.5}, "every_hours"),
])
def test_a_schedule_below_its_floor_is_a_400_naming_the_field(project, run, owner, oncall, body, field):
    answer = put(client_for(owner), project="pretrain", **body)
    assert answer.status_code == 400 and error_paths(answer) == [field]
    answer = put(client_for(oncall), project="pretrain", run="r-bounds", **body)
    assert answer.status_code == 400 and error_paths(answer) == [field]
    assert not ReviewSchedule.objects.exists()
    put(client_for(oncall), project="pretrain", run="r-bounds", every_steps=2000, every_hours=24)
    answer = patch(client_for(oncall), "?project=pretrain&run=r-bounds", **body)
    assert answer.status_code == 400 and error_paths(answer) == [field]
    assert ReviewSchedule.objects.values_list("every_steps", "every_hours").get() == (2000, 24)


def test_the_floors_themselves_are_accepted(project, run, owner):
    answer = put(client_for(owner), project="pretrain", every_steps=MIN_EVERY_STEPS, every_hours=MIN_EVERY_HOURS)
    assert answer.status_code == 200
    assert (answer.json()["every_steps"], answer.json()["every_hours"]) == (100, 1.0)


def test_the_run_pages_form_refuses_a_schedule_below_its_floor(run, oncall):
    page = client_for(oncall).post("/reviews/schedule/", {"run": "r-bounds", "every_steps": "1"}, follow=True).content.decode()
    assert "every_steps: Ensure this value is greater than or equal to 100." in page
    page = client_for(oncall).post("/reviews/schedule/", {"run": "r-bounds", "every_hours": "0.01"}, follow=True).content.decode()
    assert "every_hours: Ensure this value is greater than or equal to 1.0." in page
    assert not ReviewSchedule.objects.exists()


def test_a_schedule_is_removed_by_delete(project, run, owner, oncall, teammate, outsider):
    put(client_for(owner), project="pretrain", every_steps=500)
    put(client_for(oncall), project="pretrain", run="r-bounds", every_hours=6)
    # A project's schedule is its rule admins' to remove; a run's own, on-call's too; outsiders see nothing.
    assert client_for(oncall).delete(URL + "?project=pretrain").status_code == 403
    assert client_for(teammate).delete(URL + "?project=pretrain&run=r-bounds").status_code == 403
    assert client_for(outsider).delete(URL + "?project=pretrain").status_code == 404
    assert ReviewSchedule.objects.count() == 2

    assert client_for(oncall).delete(URL + "?project=pretrain&run=r-bounds").status_code == 204
    assert list(ReviewSchedule.objects.values_list("run", flat=True)) == [None]  # the project's applies to the run again
    assert client_for(owner).delete(URL + "?project=pretrain").status_code == 204
    assert not ReviewSchedule.objects.exists()
    again = client_for(owner).delete(URL + "?project=pretrain")
    assert again.status_code == 404 and "no such review schedule" in again.content.decode()
    assert client_for(owner).get(URL + "?project=pretrain").json()["schedules"] == []


def test_a_schedule_is_removed_by_put_or_patch_with_nulls(project, run, owner):
    client = client_for(owner)
    put(client, project="pretrain", every_steps=500, every_hours=6)
    assert put(client, project="pretrain", every_steps=None, every_hours=None).status_code == 204
    assert not ReviewSchedule.objects.exists()

    put(client, project="pretrain", every_steps=500, every_hours=6)
    kept = patch(client, "?project=pretrain", every_hours=None)  # PATCH keeps the figure it does not name
    assert kept.status_code == 200 and (kept.json()["every_steps"], kept.json()["every_hours"]) == (500, None)
    assert patch(client, "?project=pretrain", every_steps=None).status_code == 204
    assert not ReviewSchedule.objects.exists()
    assert patch(client, "?project=pretrain", every_steps=500).status_code == 404  # PATCH changes a schedule; PUT sets one
    # A body naming neither figure is refused, never read as a removal.
    put(client, project="pretrain", every_steps=500)
    refused = put(client, project="pretrain")
    assert refused.status_code == 400 and error_paths(refused) == ["every_steps"]
    assert ReviewSchedule.objects.get().every_steps == 500


def test_a_runs_own_schedule_is_removed_from_its_page(run, oncall):
    client = client_for(oncall)
    client.post("/reviews/schedule/", {"run": "r-bounds", "every_steps": "2000"})
    page = client.get("/runs/r-bounds/").content.decode()
    assert 'id="schedule-remove"' in page and 'min="100" name="every_steps"' in page
    done = client.post("/reviews/schedule/", {"run": "r-bounds", "remove": "1"}, follow=True).content.decode()
    assert "This run&#x27;s own review schedule is removed." in done and "No review schedule" in done
    assert not ReviewSchedule.objects.exists()


def test_runs_that_stopped_sending_or_finished_get_no_scheduled_review(project, settings):
    now = timezone.now()
    quiet = now - timedelta(seconds=settings.RUN_STALLED_SECONDS + 60)
    runs = {
        "sending": Run.objects.create(project=project, run_id="sending", last_seen_at=now),
        "marked-stalled": Run.objects.create(project=project, run_id="marked-stalled", status=RunStatus.STALLED, last_seen_at=now),
        "quiet-unmarked": Run.objects.create(project=project, run_id="quiet-unmarked", last_seen_at=quiet),
        "finished": Run.objects.create(project=project, run_id="finished", status=RunStatus.FINISHED, last_seen_at=now),
        "never-sent": Run.objects.create(project=project, run_id="never-sent"),
    }
    Run.objects.update(created_at=now - timedelta(hours=30))
    ReviewSchedule.objects.create(project=project, every_hours=1)
    for hours in range(3):  # beat ticks an hour apart, so each finds a new due hour
        open_due_reviews(now=now + timedelta(hours=hours))
    assert sorted(Review.objects.values_list("run__run_id", flat=True)) == ["sending"]
    assert runs["sending"].reviews.get().due_key == "hours:30"


def test_a_run_has_at_most_one_open_scheduled_review_by_the_hour(project, oncall, settings):
    settings.RUN_STALLED_SECONDS = 7 * 24 * 3600  # the ticks below are hours apart; the run counts as sending throughout
    now = timezone.now()
    run = Run.objects.create(project=project, run_id="r-hourly", last_seen_at=now)
    Run.objects.filter(pk=run.pk).update(created_at=now - timedelta(hours=10, minutes=30))
    ReviewSchedule.objects.create(project=project, every_hours=1)
    opened = [open_due_reviews(now=now + timedelta(hours=h)) for h in range(5)]
    assert opened == [1, 0, 0, 0, 0]  # one review waits for a person, however many hours come due
    decide(Review.objects.get(run__run_id="r-hourly"), by=oncall, decision="continue", observation="fine",
           explanations=["on track"])
    assert open_due_reviews(now=now + timedelta(hours=5)) == 1
    assert list(Review.objects.filter(run__run_id="r-hourly").order_by("id").values_list("due_key", flat=True)) == [
        "hours:10", "hours:15"]


def test_a_run_has_at_most_one_open_scheduled_review_by_the_step(sender, project, oncall):
    ReviewSchedule.objects.create(project=project, every_steps=100)
    for start in range(0, 500, 50):  # ten batches, four due steps
        sender.post({"run": {"id": "r-steps"}, "points": [{"step": s, "metric": "loss", "value": 1.0} for s in range(start, start + 50)]})
    assert list(Review.objects.filter(run__run_id="r-steps").values_list("due_key", flat=True)) == ["steps:100"]
    decide(Review.objects.get(run__run_id="r-steps"), by=oncall, decision="continue", observation="fine",
           explanations=["on track"])
    sender.post({"run": {"id": "r-steps"}, "points": [{"step": s, "metric": "loss", "value": 1.0} for s in range(500, 520)]})
    assert sorted(Review.objects.filter(run__run_id="r-steps").values_list("due_key", flat=True)) == ["steps:100", "steps:500"]
