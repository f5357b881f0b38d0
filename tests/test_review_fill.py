"""fill(): the five steps in order, as JSON, read with a number of queries that does not grow with the run."""
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from reviews.models import STEP_TITLES, StepState
from reviews.steps import fill
from tests.review_support import open_review, send, series

pytestmark = pytest.mark.django_db


def build(sender, run_id, components):
    points = series("loss", range(300), [3.0 - s / 1000 for s in range(300)])
    for i in range(components):
        values = [1.0] * 300
        values[100 + i] = "NaN"
        points += series("grad_norm", range(300), values, component=f"layers.{i}")
        points += series(f"eval/slice{i}/loss", range(50, 300, 50), [2.0] * 5)
    send(sender, {"id": run_id, "budget": {"steps": 600}}, points, phases=[{"step": 150, "phase": "checkpoint"}])


def test_fill_gives_five_steps_in_order_as_plain_json(sender):
    build(sender, "full", 3)
    steps = fill(open_review("full"))
    assert [s["number"] for s in steps] == [1, 2, 3, 4, 5] and all(s["number"] in STEP_TITLES for s in steps)
    assert all(s["state"] in StepState.values and s["summary"] for s in steps)
    assert steps[1]["state"] == "fail"  # the NaNs
    json.dumps(steps, allow_nan=False)
    for step in steps:
        assert isinstance(step["findings"].get("rows"), list) and isinstance(step["findings"].get("columns"), list)
        for link in step["evidence"]:
            assert set(link) == {"label", "href"} and link["href"].startswith("/")


def test_the_number_of_queries_does_not_grow_with_the_components(sender):
    counts = []
    for run_id, components in (("small", 2), ("large", 20)):
        build(sender, run_id, components)
        review = open_review(run_id)
        with CaptureQueriesContext(connection) as queries:
            fill(review)
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    assert counts[0] < 40, counts
