"""A field the contract does not define is a 400 at its path (a typo must never be silently dropped)."""
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


def test_unknown_top_level_field_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), metrics=[good_point(4)]))
    assert_rejected(response, 400, "metrics", "unknown field", "'metrics'")
    assert_nothing_stored(sender, before)


def test_unknown_field_in_run_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "owner": "olivia"}))
    assert_rejected(response, 400, "run.owner", "unknown field", "'owner'")
    assert_nothing_stored(sender, before)


def test_unknown_field_in_a_point_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(4), good_point(5, unit="nats")))
    assert_rejected(response, 400, "points[2].unit", "unknown field", "'unit'")
    assert_nothing_stored(sender, before)


def test_misspelt_value_in_a_point_is_reported_as_unknown_and_value_as_missing(sender):
    # Three keys, one of them wrong: the validator's fast path for three-key points must not skip the check.
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), {"step": 4, "metric": "loss", "valeu": 1.0}))
    assert_rejected(response, 400, "points[1].valeu", "unknown field", "'valeu'")
    assert_rejected(response, 400, "points[1].value", "value is required")
    assert_nothing_stored(sender, before)


def test_unknown_field_in_an_event_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(severity="high")]))
    assert_rejected(response, 400, "events[0].severity", "unknown field", "'severity'")
    assert_nothing_stored(sender, before)


def test_unknown_field_in_a_phase_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), phases=[{"step": 3, "phase": "steady", "until": 10}]))
    assert_rejected(response, 400, "phases[0].until", "unknown field", "'until'")
    assert_nothing_stored(sender, before)


def test_unknown_field_in_the_budget_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "budget": {"steps": 10, "tokens": 10**9}}))
    assert_rejected(response, 400, "run.budget.tokens", "unknown field", "'tokens'")
    assert_nothing_stored(sender, before)
