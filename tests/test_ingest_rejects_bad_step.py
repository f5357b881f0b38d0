"""A step must be an integer from 0 to 2**53 - 1: anything else is a 400 at that step's path.

Bare NaN/Infinity tokens are accepted by the parser (Python's json writes them for
values), so they reach the step check and must be refused there, not stored.
"""
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


def raw_batch(step_token):
    """A JSON body written by hand, so a bare NaN token (which orjson cannot write) reaches the server."""
    return (
        '{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1.0}, '
        '{"step": %s, "metric": "loss", "value": 1.0}, {"step": 5, "metric": "loss", "value": 1.0}]}'
    ) % (RUN_ID, step_token)


def test_negative_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(-1)))
    assert_rejected(response, 400, "points[1].step", "step must be an integer from 0", "-1")
    assert_nothing_stored(sender, before)


def test_fractional_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(3.5)))
    assert_rejected(response, 400, "points[1].step", "whole number", "fraction 3.5")
    assert_nothing_stored(sender, before)


def test_bare_nan_token_as_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(raw_batch("NaN"))
    assert_rejected(response, 400, "points[1].step", "step must be an integer", "nan", "non-finite")
    assert_nothing_stored(sender, before)


def test_bare_infinity_token_as_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(raw_batch("Infinity"))
    assert_rejected(response, 400, "points[1].step", "step must be an integer", "inf", "non-finite")
    assert_nothing_stored(sender, before)


def test_string_nan_as_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point("NaN")))
    assert_rejected(response, 400, "points[1].step", "step must be an integer", "string 'NaN'")
    assert_nothing_stored(sender, before)


def test_numeric_string_as_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point("4")))
    assert_rejected(response, 400, "points[1].step", "step must be an integer", "string '4'")
    assert_nothing_stored(sender, before)


def test_step_above_two_to_the_53_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(2**53)))
    assert_rejected(response, 400, "points[1].step", "step must be an integer from 0 to 9007199254740991", str(2**53))
    assert_nothing_stored(sender, before)


def test_boolean_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(True)))
    assert_rejected(response, 400, "points[1].step", "step must be an integer", "boolean")
    assert_nothing_stored(sender, before)


def test_negative_step_of_an_event_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(step=-5)]))
    assert_rejected(response, 400, "events[0].step", "step must be an integer from 0", "-5")
    assert_nothing_stored(sender, before)


def test_fractional_step_of_a_phase_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), phases=[{"step": 2.5, "phase": "steady"}]))
    assert_rejected(response, 400, "phases[0].step", "whole number", "2.5")
    assert_nothing_stored(sender, before)


def test_missing_step_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), {"metric": "loss", "value": 1.0}))
    assert_rejected(response, 400, "points[1].step", "step is required")
    assert_nothing_stored(sender, before)
