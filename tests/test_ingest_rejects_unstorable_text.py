"""Text the database cannot hold is a 400 at its path, never a server error half-way through storing.

PostgreSQL refuses the NUL character in text and in jsonb, so before these checks a
"\\u0000" in a run name, phase, tag, batch_id, config or event detail was a 500 there
(and stored on SQLite). Non-finite numbers inside config/detail are not errors: they
are stored as the contract's own strings "NaN"/"Infinity"/"-Infinity".
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

NUL = "\x00"


def test_nul_in_run_name_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "name": f"bad{NUL}name"}))
    assert_rejected(response, 400, "run.name", "NUL character")
    assert_nothing_stored(sender, before)


def test_nul_in_phase_name_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), phases=[{"step": 3, "phase": f"steady{NUL}"}]))
    assert_rejected(response, 400, "phases[0].phase", "NUL character")
    assert_nothing_stored(sender, before)


def test_nul_in_batch_id_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), batch_id=f"job{NUL}1"))
    assert_rejected(response, 400, "batch_id", "NUL character")
    assert_nothing_stored(sender, before)


def test_nul_in_a_tag_value_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "tags": {"team": f"pre{NUL}train"}}))
    assert_rejected(response, 400, "run.tags.team", "NUL character")
    assert_nothing_stored(sender, before)


def test_nul_in_a_tag_name_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "tags": {f"te{NUL}am": "pretrain"}}))
    assert_rejected(response, 400, f"run.tags.te{NUL}am", "NUL character")
    assert_nothing_stored(sender, before)


def test_nul_deep_in_config_is_rejected_at_its_path(sender):
    before = seed_run(sender)
    config = {"optimizer": {"name": "adamw", "betas": [0.9, f"0.95{NUL}"]}}
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "config": config}))
    assert_rejected(response, 400, "run.config.optimizer.betas[1]", "NUL character")
    assert_nothing_stored(sender, before)


def test_nul_in_event_detail_is_rejected_at_its_path(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(detail={"note": f"x{NUL}y"})]))
    assert_rejected(response, 400, "events[0].detail.note", "NUL character")
    assert_nothing_stored(sender, before)


def test_nonfinite_numbers_in_config_and_detail_are_stored_as_the_contracts_strings(sender):
    # Not a rejection: Python's json writes these tokens (max_grad_norm=inf is a common config),
    # and neither SQLite's nor PostgreSQL's JSON can hold them as numbers (that was a 500).
    body = (
        '{"run": {"id": "inf-config", "config": {"max_grad_norm": Infinity, "sched": {"floor": -Infinity, "x": [NaN]}}},'
        ' "events": [{"step": 1, "component": "node1", "condition": "exploding", "magnitude": 3, "detail": {"threshold": Infinity}}]}'
    )
    response = sender.post(body)
    assert response.status_code == 202, response.content
    assert sender.get("/api/v1/runs/inf-config/").json()["config"] == {
        "max_grad_norm": "Infinity",
        "sched": {"floor": "-Infinity", "x": ["NaN"]},
    }
    assert sender.get("/api/v1/runs/inf-config/events/").json()["events"][0]["detail"] == {"threshold": "Infinity"}
    # Sending the same config again is not an identity change (a float NaN never equals itself).
    assert sender.post(body).status_code == 202
    assert sender.get("/api/v1/runs/inf-config/").json()["identity_changes"] == []
