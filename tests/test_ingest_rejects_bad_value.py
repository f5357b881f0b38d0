"""A value is a number or exactly "NaN", "Infinity", "-Infinity": another spelling, or null, is a 400."""
import pytest

from tests.ingest_rejects_support import (
    RUN_ID,
    assert_nothing_stored,
    assert_rejected,
    batch,
    good_point,
    ndjson,
    seed_run,
)

pytestmark = pytest.mark.django_db


def test_value_nan_in_lower_case_is_rejected_with_the_exact_spelling(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(4), good_point(5), good_point(6, value="nan")))
    assert_rejected(response, 400, "points[3].value", '"NaN"', "exact spelling", "'nan'")
    assert_nothing_stored(sender, before)


def test_value_null_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(4, value=None)))
    assert_rejected(response, 400, "points[1].value", "value must be a number", "null")
    assert_nothing_stored(sender, before)


def test_value_inf_abbreviation_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3, value="inf")))
    assert_rejected(response, 400, "points[0].value", "exact spelling", "'inf'")
    assert_nothing_stored(sender, before)


def test_value_as_numeric_string_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3, value="2.31")))
    assert_rejected(response, 400, "points[0].value", "value must be a number", "'2.31'")
    assert_nothing_stored(sender, before)


def test_missing_value_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), {"step": 4, "metric": "loss"}))
    assert_rejected(response, 400, "points[1].value", "value is required")
    assert_nothing_stored(sender, before)


def test_integer_value_beyond_the_float_range_is_rejected(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1%s}]}' % (RUN_ID, "0" * 400)
    assert_rejected(sender.post(body), 400, "points[0].value", "too large")
    assert_nothing_stored(sender, before)


def test_ndjson_value_null_is_rejected_at_its_line(sender):
    before = seed_run(sender)
    body = ndjson(
        '{"type": "point", "run": "%s", "step": 3, "metric": "loss", "value": 1.0}' % RUN_ID,
        '{"type": "point", "run": "%s", "step": 4, "metric": "loss", "value": null}' % RUN_ID,
    )
    response = sender.post(body, content_type="application/x-ndjson")
    message = assert_rejected(response, 400, "lines[2].value", "value must be a number", "null")
    assert message.startswith("line 2:")
    assert_nothing_stored(sender, before)


def test_time_beyond_the_float_range_is_a_400_not_a_crash(sender):
    from tests.conftest import stored_counts

    before = stored_counts()
    body = ('{"run": {"id": "huge-time"}, "points": [{"step": 1, "metric": "loss", "value": 1.0},'
            ' {"step": 2, "metric": "loss", "value": 1.0, "time": 1' + "0" * 400 + "}]}")
    response = sender.post(body)
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "points[1].time"
    assert stored_counts() == before
