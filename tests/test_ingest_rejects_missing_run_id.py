"""Every batch must name its run: without run.id it is a 400 at `run.id` (or `run`), and nothing is stored."""
import pytest

from tests.ingest_rejects_support import RUN_ID, assert_nothing_stored, assert_rejected, good_point, ndjson, seed_run

pytestmark = pytest.mark.django_db


def test_run_without_id_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"run": {"name": "a run with no id"}, "points": [good_point(3)]})
    assert_rejected(response, 400, "run.id", "run.id is required")
    assert_nothing_stored(sender, before)


def test_empty_run_object_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"run": {}, "points": [good_point(3)]})
    assert_rejected(response, 400, "run.id", "run.id is required")
    assert_nothing_stored(sender, before)


def test_batch_without_run_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"points": [good_point(3)]})
    assert_rejected(response, 400, "run", "run is required", "run.id")
    assert_nothing_stored(sender, before)


def test_empty_run_id_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"run": {"id": ""}, "points": [good_point(3)]})
    assert_rejected(response, 400, "run.id", "run.id must not be empty")
    assert_nothing_stored(sender, before)


def test_null_run_id_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"run": {"id": None}, "points": [good_point(3)]})
    assert_rejected(response, 400, "run.id", "run.id must be a string", "null")
    assert_nothing_stored(sender, before)


def test_run_id_with_a_space_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post({"run": {"id": "reject target"}, "points": [good_point(3)]})
    assert_rejected(response, 400, "run.id", "characters outside")
    assert_nothing_stored(sender, before)
    assert sender.get("/api/v1/runs/reject target/").status_code == 404


def test_ndjson_point_line_without_run_is_rejected(sender):
    before = seed_run(sender)
    body = ndjson(
        '{"type": "point", "run": "%s", "step": 3, "metric": "loss", "value": 1.0}' % RUN_ID,
        '{"type": "point", "step": 4, "metric": "loss", "value": 1.0}',
    )
    response = sender.post(body, content_type="application/x-ndjson")
    message = assert_rejected(response, 400, "lines[2].run", "run (the run id) is required")
    assert message.startswith("line 2:")
    assert_nothing_stored(sender, before)


def test_ndjson_run_line_without_id_is_rejected(sender):
    before = seed_run(sender)
    body = ndjson(
        '{"type": "run", "name": "nameless"}',
        '{"type": "point", "run": "%s", "step": 3, "metric": "loss", "value": 1.0}' % RUN_ID,
    )
    response = sender.post(body, content_type="application/x-ndjson")
    message = assert_rejected(response, 400, "lines[1].id", "run.id is required")
    assert message.startswith("line 1:")
    assert_nothing_stored(sender, before)
