"""Step 5 says when there is nothing to project: at the end of the budget, when the fit disagrees with the data it
was fitted on, and without the points' own times it gives no rate, run time or finish (nor does the postmortem)."""
import numpy as np
import pytest

from ingest.models import Run
from reviews.postmortem import postmortem_markdown
from reviews.steps.remaining_value import remaining_value
from tests.review_support import open_review, send, series

pytestmark = pytest.mark.django_db


def loss(steps):
    return 1.5 + 20.0 * (np.asarray(steps, dtype=float) + 1) ** -0.5


def send_run(sender, run, n, curve=loss, timed=True):
    steps = np.arange(n)
    values = curve(steps) + np.random.default_rng(1).normal(0, 0.01, n)
    for lo in range(0, n, 500):  # batch after batch, as a job sends
        send(sender, run if lo == 0 else run["id"],
             series("loss", steps[lo:lo + 500], values[lo:lo + 500], seconds_per_step=1.0 if timed else None))


def row(step, item):
    [found] = [r for r in step["findings"]["rows"] if r["item"] == item]
    return found


def test_at_the_end_of_its_budget_there_is_no_projection(sender):
    send_run(sender, {"id": "done", "budget": {"steps": 2000}}, 2001)  # steps 0-2,000 of 2,000
    step = remaining_value(open_review("done"))
    assert step["findings"]["projection"] is None
    assert step["state"] == "no_data"
    assert step["summary"] == "At the end of its budget (2,000 of 2,000 steps): no projection"
    assert "projected" not in row(step, "loss")["detail"]


def test_a_fit_that_disagrees_with_its_own_data_is_no_projection(sender):
    # The loss fell as usual, then stepped up for the last 150 steps: a curve fitted over the whole window
    # cannot hold the newest values.
    def jumped(steps):
        steps = np.asarray(steps, dtype=float)
        return loss(steps) + np.where(steps >= 1850, 0.4, 0.0)

    send_run(sender, {"id": "jump", "budget": {"steps": 4000}}, 2000, curve=jumped)
    step = remaining_value(open_review("jump"))
    assert step["findings"]["projection"] is None, step["summary"]
    assert step["state"] != "pass"
    assert "disagrees with the data it was fitted on" in step["summary"]


def test_points_without_their_own_time_give_no_time_data(sender, owner):
    send_run(sender, {"id": "untimed", "budget": {"steps": 4000}, "config": {"gpus": 8}}, 2000, timed=False)
    step = remaining_value(open_review("untimed"))
    findings = step["findings"]
    assert findings["steps_per_hour"] is None and findings["elapsed_hours"] is None and findings["hours_to_finish"] is None
    run_time = row(step, "run time")
    assert run_time["used"] == "no time data" and run_time["left"] == "no time data"
    assert "steps/h" not in run_time["detail"] and "to finish" not in step["summary"]
    assert findings["projection"] is not None  # the projection needs steps, not times
    assert "| Training time (points' own times) | no time data |" in postmortem_markdown(Run.objects.get(run_id="untimed"))


def test_points_with_their_own_time_keep_their_rate_and_training_time(sender):
    send_run(sender, {"id": "timed", "budget": {"steps": 4000}}, 2000)
    step = remaining_value(open_review("timed"))
    assert step["findings"]["steps_per_hour"] == pytest.approx(3600)
    assert "3,600 steps/h" in row(step, "run time")["detail"]
    assert "| Training time (points' own times) | 33.3 min |" in postmortem_markdown(Run.objects.get(run_id="timed"))


def test_own_times_in_whole_seconds_still_count_as_time_data(sender):
    # Ten steps a second, times logged in whole seconds: many points share a time, yet the times are the job's own.
    from tests.review_support import T0

    steps = np.arange(2000)
    points = [{"step": int(s), "metric": "loss", "value": float(loss(s)), "time": float(int(T0 + s / 10))} for s in steps]
    for lo in range(0, 2000, 500):
        send(sender, {"id": "coarse", "budget": {"steps": 4000}} if lo == 0 else "coarse", points[lo:lo + 500])
    step = remaining_value(open_review("coarse"))
    assert step["findings"]["steps_per_hour"] == pytest.approx(36000, rel=0.02)
    assert "no time data" not in row(step, "run time")["detail"]
