"""A field of the wrong JSON type is a 400 at that field's path, and nothing of the batch is stored."""
import pytest

from tests.ingest_rejects_support import (
    RUN_ID,
    assert_nothing_stored,
    assert_rejected,
    batch,
    good_event,
    good_point,
    seed_run,
)

pytestmark = pytest.mark.django_db


def test_metric_as_a_number_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), {"step": 3, "metric": 7, "value": 1.0}, good_point(4)))
    message = assert_rejected(response, 400, "points[1].metric", "metric must be a string", "number 7")
    assert "points[1].metric" not in message  # the path is in "path"; the message speaks to a person
    assert_nothing_stored(sender, before)


def test_run_as_a_string_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"run": RUN_ID, "points": [good_point(3)]})
    assert_rejected(response, 400, "run", "run must be an object", f"string '{RUN_ID}'")
    assert_nothing_stored(sender, before)


def test_points_as_an_object_instead_of_an_array_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"run": {"id": RUN_ID}, "points": {"step": 3, "metric": "loss", "value": 1.0}})
    assert_rejected(response, 400, "points", "points must be an array", "object")
    assert_nothing_stored(sender, before)


def test_events_as_a_string_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events="exploding"))
    assert_rejected(response, 400, "events", "events must be an array", "string")
    assert_nothing_stored(sender, before)


def test_a_point_that_is_not_an_object_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), [4, "loss", 1.0]))
    assert_rejected(response, 400, "points[1]", "point must be an object", "array")
    assert_nothing_stored(sender, before)


def test_value_true_is_rejected_although_python_counts_bool_as_int(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(4, value=True)))
    assert_rejected(response, 400, "points[1].value", "value must be a number", "boolean")
    assert_nothing_stored(sender, before)


def test_time_as_an_iso_string_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3, time="2026-11-30T10:00:00Z")))
    assert_rejected(response, 400, "points[0].time", "time must be Unix seconds", "string")
    assert_nothing_stored(sender, before)


def test_magnitude_as_a_string_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(magnitude="7.5")]))
    assert_rejected(response, 400, "events[0].magnitude", "magnitude must be a number", "string '7.5'")
    assert_nothing_stored(sender, before)


def test_config_as_a_string_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "config": "lr=0.1"}))
    assert_rejected(response, 400, "run.config", "config must be an object", "string")
    assert_nothing_stored(sender, before)


def test_a_tag_that_is_not_a_string_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "tags": {"team": "pretrain", "nodes": 8}}))
    assert_rejected(response, 400, "run.tags.nodes", "must be a string", "number 8")
    assert_nothing_stored(sender, before)


def test_a_time_beyond_the_float_range_is_a_400_not_a_server_error(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1.0, "time": 1%s}]}' % (RUN_ID, "0" * 400)
    assert_rejected(sender.post(body), 400, "points[0].time", "time must be Unix seconds", "401 digits")
    assert_nothing_stored(sender, before)


def test_a_magnitude_beyond_the_float_range_is_a_400_not_a_server_error(sender):
    before = seed_run(sender)
    event = '{"step": 3, "component": "node1", "condition": "exploding", "magnitude": 1%s}' % ("0" * 400)
    body = '{"run": {"id": "%s"}, "events": [%s]}' % (RUN_ID, event)
    assert_rejected(sender.post(body), 400, "events[0].magnitude", "magnitude", "too large")
    assert_nothing_stored(sender, before)


def test_gpu_hours_beyond_the_float_range_is_a_400_not_a_server_error(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s", "budget": {"gpu_hours": 1%s}}}' % (RUN_ID, "0" * 400)
    assert_rejected(sender.post(body), 400, "run.budget.gpu_hours", "gpu_hours must be a number > 0")
    assert_nothing_stored(sender, before)
