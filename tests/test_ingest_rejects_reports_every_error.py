"""A batch with several bad fields lists every one of them, each at its own path, and stores nothing."""
import pytest

from tests.ingest_rejects_support import (
    RUN_ID,
    assert_nothing_stored,
    assert_rejected,
    batch,
    errors_of,
    good_event,
    good_point,
    ndjson,
    seed_run,
)

pytestmark = pytest.mark.django_db


def test_bad_step_and_bad_value_in_different_points_are_both_reported(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(-1), good_point(4), good_point(5, value="nan"), good_point(6)))
    assert_rejected(response, 400, "points[0].step", "step must be an integer from 0", "-1")
    assert_rejected(response, 400, "points[2].value", "exact spelling", "'nan'")
    assert {e["path"] for e in errors_of(response, 400)} == {"points[0].step", "points[2].value"}
    assert_nothing_stored(sender, before)


def test_two_bad_fields_of_one_point_are_both_reported(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), {"step": 2.5, "metric": "loss", "value": None}))
    assert_rejected(response, 400, "points[1].step", "whole number")
    assert_rejected(response, 400, "points[1].value", "null")
    assert_nothing_stored(sender, before)


def test_errors_in_every_part_of_a_batch_are_all_reported(sender):
    before = seed_run(sender)
    response = sender.post(
        {
            "batch_id": "",
            "run": {"id": RUN_ID, "name": "n" * 257, "owner": "x"},
            "phases": [{"step": -1, "phase": "steady"}],
            "points": [good_point(3, metric="bad metric"), good_point(4, layer="physics")],
            "events": [good_event(condition="on_fire", magnitude="big")],
            "extra": True,
        }
    )
    expected = {
        "batch_id",
        "run.name",
        "run.owner",
        "phases[0].step",
        "points[0].metric",
        "points[1].layer",
        "events[0].condition",
        "events[0].magnitude",
        "extra",
    }
    assert {e["path"] for e in errors_of(response, 400)} == expected
    assert_rejected(response, 400, "points[1].layer", "layer must be one of", "'physics'")
    assert_rejected(response, 400, "points[0].metric", "characters outside")
    assert_nothing_stored(sender, before)


def test_bad_lines_of_ndjson_are_all_reported_with_their_numbers(sender):
    before = seed_run(sender)
    line = '{"type": "point", "run": "%s", "step": %s, "metric": "loss", "value": %s}'
    body = ndjson(line % (RUN_ID, 3, 1.0), line % (RUN_ID, -4, 1.0), line % (RUN_ID, 5, 1.0), line % (RUN_ID, 6, "null"))
    response = sender.post(body, content_type="application/x-ndjson")
    assert assert_rejected(response, 400, "lines[2].step", "-4").startswith("line 2:")
    assert assert_rejected(response, 400, "lines[4].value", "null").startswith("line 4:")
    assert {e["path"] for e in errors_of(response, 400)} == {"lines[2].step", "lines[4].value"}
    assert_nothing_stored(sender, before)
