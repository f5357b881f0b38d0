"""Step 5 of a review: budget used and left, the recent rate, the projection at the budget's end, time and cost to finish."""
import json

import numpy as np
import pytest

from reviews.steps.remaining_value import remaining_value
from tests.review_support import open_review, send, series

pytestmark = pytest.mark.django_db


def true_loss(steps):
    return 1.5 + 20.0 * (np.asarray(steps, dtype=float) + 1) ** -0.5


def send_run(sender, run, n=2000, noise=0.01, curve=true_loss, seed=1):
    steps = np.arange(n)
    values = curve(steps) + np.random.default_rng(seed).normal(0, noise, n)
    for lo in range(0, n, 1000):  # the way a job sends: batch after batch, each point with its own time (1 s a step)
        send(sender, run if lo == 0 else run["id"], series("loss", steps[lo:lo + 1000], values[lo:lo + 1000], seconds_per_step=1.0))


def test_a_run_on_track_gets_a_projection_with_an_interval_and_passes(sender):
    send_run(sender, {"id": "track", "budget": {"steps": 4000, "gpu_hours": 100}, "config": {"gpus": 8, "target": 2.0}})
    step = remaining_value(open_review("track"))
    assert step["state"] == "pass", step["summary"]
    projection = step["findings"]["projection"]
    assert projection["at_step"] == 4000 and projection["reaches_target"] is True
    assert projection["low"] < true_loss(4000) < projection["high"]  # the interval holds the truth
    assert projection["high"] - projection["low"] < 0.1
    assert projection["r2"] > 0.9 and projection["fit_from_step"] == 40  # after the implicit warmup (1% of the budget)
    findings = step["findings"]
    assert findings["steps_per_hour"] == pytest.approx(3600)
    assert findings["elapsed_hours"] == pytest.approx(1999 / 3600)
    assert findings["hours_to_finish"] == pytest.approx(2001 / 3600)
    assert findings["gpu_hours_used"] == pytest.approx(8 * 1999 / 3600) and findings["gpu_hours_to_finish"] == pytest.approx(8 * 2001 / 3600)
    slope = 20 * 0.5 * 1800.0 ** -1.5 * 1000  # the true curve's fall per 1,000 steps around the last fifth of the window
    assert findings["rate_per_1000_steps"] == pytest.approx(slope, rel=0.25)
    assert step["summary"].startswith("Loss projected") and "reaching its target 2" in step["summary"]
    json.dumps(step, allow_nan=False)


def test_a_run_that_cannot_reach_its_target_within_budget_asks_for_attention(sender):
    send_run(sender, {"id": "short", "budget": {"steps": 4000}, "config": {"target": {"metric": "loss", "value": 1.6}}})
    step = remaining_value(open_review("short"))
    assert step["state"] == "attention"
    projection = step["findings"]["projection"]
    assert projection["reaches_target"] is False and projection["value"] > 1.6
    assert "does not reach its target 1.6 (not even at the interval's best end)" in step["summary"]


def test_a_target_given_with_the_review_is_used_too(sender):
    send_run(sender, {"id": "asked", "budget": {"steps": 4000}})
    step = remaining_value(open_review("asked", trigger_detail={"target": 1.7}))
    assert step["findings"]["target"] == 1.7 and step["state"] == "attention"


def test_a_noisy_flat_run_gets_no_projection(sender):
    send_run(sender, {"id": "flat", "budget": {"steps": 4000}, "config": {"target": 1.0}}, noise=0.2, curve=lambda s: np.full(len(s), 2.0))
    step = remaining_value(open_review("flat"))
    assert step["findings"]["projection"] is None
    assert step["findings"]["no_projection"].startswith("the fit is poor (R²")
    assert step["state"] == "no_data" and step["summary"].startswith("No projection: the fit is poor")
    assert "projected" not in json.dumps(step["findings"]["rows"])


def test_running_over_the_gpu_hours_asks_for_attention(sender):
    send_run(sender, {"id": "costly", "budget": {"steps": 4000, "gpu_hours": 5}, "config": {"world_size": 8}})
    step = remaining_value(open_review("costly"))
    assert step["state"] == "attention"
    assert "Needs 8.9 GPU-h against a budget of 5" in step["summary"]


def test_no_projection_far_beyond_the_history_or_without_a_step_budget(sender):
    send_run(sender, {"id": "early", "budget": {"steps": 100000}})  # fitted from 1,000 (implicit warmup) to 1,999
    step = remaining_value(open_review("early"))
    assert step["findings"]["projection"] is None and "more than 4x" in step["findings"]["no_projection"]
    send_run(sender, {"id": "nobudget"}, n=1000)
    assert remaining_value(open_review("nobudget"))["findings"]["no_projection"] == "the budget gives no step count"
