"""Over 10,000 points and events, or over 4 MiB of body, is 413 with a message that says to split the batch."""
import orjson
import pytest

from tests.conftest import stored_counts
from tests.ingest_rejects_support import RUN_ID, assert_nothing_stored, assert_rejected, good_event, good_point, seed_run

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


def points(n, start=10):
    return [good_point(start + i) for i in range(n)]


def test_10001_points_are_rejected_with_413(sender):
    before = seed_run(sender)
    response = sender.post({"run": {"id": RUN_ID}, "points": points(10_001)})
    assert_rejected(response, 413, "", "10001 points and events", "at most 10000", "split the batch")
    assert_nothing_stored(sender, before)


def test_points_and_events_count_together_against_the_limit(sender):
    before = seed_run(sender)
    response = sender.post(
        {"run": {"id": RUN_ID}, "points": points(5_001), "events": [good_event(step=10 + i) for i in range(5_000)]}
    )
    assert_rejected(response, 413, "", "10001 points and events", "at most 10000")
    assert_nothing_stored(sender, before)


def test_10001_ndjson_point_lines_are_rejected_with_413(sender):
    before = seed_run(sender)
    line = '{"type": "point", "run": "%s", "step": %d, "metric": "loss", "value": 1.0}'
    body = "\n".join(line % (RUN_ID, 10 + i) for i in range(10_001)).encode()
    response = sender.post(body, content_type="application/x-ndjson")
    assert_rejected(response, 413, "", "10001 points and events", "at most 10000")
    assert_nothing_stored(sender, before)


def test_body_over_4_mib_is_rejected_with_413(sender):
    before = seed_run(sender)
    body = orjson.dumps({"run": {"id": RUN_ID}, "points": points(10)})
    body = body + b" " * (4 * MIB + 1 - len(body))  # valid JSON, well under the item limit, one byte too long
    assert len(body) == 4 * MIB + 1
    response = sender.post(body)
    assert_rejected(response, 413, "", f"{4 * MIB + 1} bytes", "4 MiB", "split the batch")
    assert_nothing_stored(sender, before)


def test_ndjson_body_over_4_mib_is_rejected_with_413(sender):
    before = seed_run(sender)
    line = '{"type": "point", "run": "%s", "step": 10, "metric": "loss", "value": 1.0}' % RUN_ID
    body = (line + "\n").encode()
    body = body + b"\n" * (4 * MIB + 1 - len(body))
    response = sender.post(body, content_type="application/x-ndjson")
    assert_rejected(response, 413, "", "4 MiB")
    assert_nothing_stored(sender, before)


def test_exactly_10000_points_in_a_body_of_exactly_4_mib_are_accepted(sender):
    # Control: both limits are inclusive, so the 413s above are about the one point and the one byte more.
    counts = stored_counts()
    body = orjson.dumps({"run": {"id": "at-the-limit"}, "points": points(10_000, start=0)})
    body = body + b" " * (4 * MIB - len(body))
    response = sender.post(body)
    assert response.status_code == 202, response.content
    assert response.json()["accepted"]["points"] == 10_000
    assert stored_counts()["Run"] == counts["Run"] + 1
    stored = sender.get("/api/v1/runs/at-the-limit/points/", metric="loss").json()["points"]
    assert len(stored) == 10_000
