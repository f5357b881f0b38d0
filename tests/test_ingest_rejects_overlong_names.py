"""Names have length limits (run.id and metric 128, component and run.name 256): one character more is a 400."""
import pytest

from tests.conftest import stored_counts
from tests.ingest_rejects_support import (
    RUN_ID,
    assert_nothing_stored,
    assert_rejected,
    batch,
    good_event,
    good_point,
    ndjson,
    seed_run,
)

pytestmark = pytest.mark.django_db


def test_run_id_of_129_characters_is_rejected(sender):
    long_id = "r" * 129
    before = seed_run(sender)
    response = sender.post({"run": {"id": long_id}, "points": [good_point(3)]})
    assert_rejected(response, 400, "run.id", "129 characters", "at most 128")
    assert_nothing_stored(sender, before)
    assert sender.get(f"/api/v1/runs/{long_id}/").status_code == 404


def test_metric_of_129_characters_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(4, metric="m" * 129)))
    assert_rejected(response, 400, "points[1].metric", "129 characters", "at most 128")
    assert_nothing_stored(sender, before)


def test_point_component_of_257_characters_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), good_point(4, component="c" * 257)))
    assert_rejected(response, 400, "points[1].component", "257 characters", "at most 256")
    assert_nothing_stored(sender, before)


def test_event_component_of_257_characters_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), events=[good_event(component="c" * 257)]))
    assert_rejected(response, 400, "events[0].component", "257 characters", "at most 256")
    assert_nothing_stored(sender, before)


def test_run_name_of_257_characters_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), run={"id": RUN_ID, "name": "n" * 257}))
    assert_rejected(response, 400, "run.name", "257 characters", "at most 256")
    assert_nothing_stored(sender, before)


def test_batch_id_of_129_characters_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(batch(good_point(3), batch_id="b" * 129))
    assert_rejected(response, 400, "batch_id", "129 characters", "at most 128")
    assert_nothing_stored(sender, before)


def test_ndjson_batch_id_header_of_129_characters_is_rejected(sender):
    before = seed_run(sender)
    body = ndjson('{"type": "point", "run": "%s", "step": 3, "metric": "loss", "value": 1.0}' % RUN_ID)
    response = sender.post(body, content_type="application/x-ndjson", headers={"X-Batch-Id": "b" * 129})
    assert_rejected(response, 400, "X-Batch-Id", "longer than 128")
    assert_nothing_stored(sender, before)


def test_names_exactly_at_the_limits_are_accepted(sender):
    # Control: the limits are inclusive, so the rejections above are about the one extra character.
    run_id, metric, component = "r" * 128, "m" * 128, "c" * 256
    counts = stored_counts()
    response = sender.post(
        {
            "batch_id": "b" * 128,
            "run": {"id": run_id, "name": "n" * 256},
            "points": [good_point(1, metric=metric, component=component)],
            "events": [good_event(component=component)],
        }
    )
    assert response.status_code == 202, response.content
    assert stored_counts()["Run"] == counts["Run"] + 1
    assert sender.get(f"/api/v1/runs/{run_id}/").json()["name"] == "n" * 256
    points = sender.get(f"/api/v1/runs/{run_id}/points/", metric=metric, component=component).json()["points"]
    assert points == [{"step": 1, "value": 1.0}]
