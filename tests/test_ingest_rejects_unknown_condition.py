"""An event's condition is one of eight names; anything else is a 400 at `events[N].condition`."""
import pytest

from tests.ingest_rejects_support import (
    assert_nothing_stored,
    assert_rejected,
    batch,
    good_event,
    good_point,
    seed_run,
)

pytestmark = pytest.mark.django_db

EIGHT = "dead, oscillating, saturated, stagnant, exploding, low_confidence, lost_gradient, unclassified"


def test_unknown_condition_is_rejected_with_the_allowed_names(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(), good_event(condition="on_fire")]))
    assert_rejected(response, 400, "events[1].condition", "condition must be one of", EIGHT, "'on_fire'")
    assert_nothing_stored(sender, before)


def test_condition_in_the_wrong_case_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(condition="Exploding")]))
    assert_rejected(response, 400, "events[0].condition", "condition must be one of", "'Exploding'")
    assert_nothing_stored(sender, before)


def test_null_condition_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(condition=None)]))
    assert_rejected(response, 400, "events[0].condition", "condition must be one of", "null")
    assert_nothing_stored(sender, before)


def test_missing_condition_is_rejected(sender):
    before = seed_run(sender)
    event = good_event()
    del event["condition"]
    response = sender.post(batch(good_point(3), events=[event]))
    assert_rejected(response, 400, "events[0].condition", "condition is required")
    assert_nothing_stored(sender, before)
