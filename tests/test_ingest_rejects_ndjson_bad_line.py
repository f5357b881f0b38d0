"""NDJSON is atomic per request: one bad line among good ones stores nothing and names that line (counted from 1)."""
import pytest

from tests.ingest_rejects_support import RUN_ID, assert_nothing_stored, assert_rejected, errors_of, ndjson, seed_run

pytestmark = pytest.mark.django_db

NDJSON = "application/x-ndjson"


def point_line(step, value="1.0", run=RUN_ID):
    return '{"type": "point", "run": "%s", "step": %s, "metric": "loss", "value": %s}' % (run, step, value)


def test_one_bad_value_among_good_lines_stores_nothing_and_names_the_line(sender):
    before = seed_run(sender)
    body = ndjson(
        '{"type": "run", "id": "%s"}' % RUN_ID,
        point_line(3),
        point_line(4, '"nan"'),
        point_line(5),
        '{"type": "event", "run": "%s", "step": 5, "component": "node1", "condition": "dead", "magnitude": 1}' % RUN_ID,
    )
    response = sender.post(body, content_type=NDJSON)
    message = assert_rejected(response, 400, "lines[3].value", "exact spelling", "'nan'")
    assert message.startswith("line 3:"), message
    assert len(errors_of(response, 400)) == 1
    assert_nothing_stored(sender, before)


def test_one_malformed_line_among_good_lines_stores_nothing_and_names_the_line(sender):
    before = seed_run(sender)
    body = ndjson(point_line(3), point_line(4), point_line(5)[:-1], point_line(6))
    response = sender.post(body, content_type=NDJSON)
    message = assert_rejected(response, 400, "lines[3]", "malformed JSON")
    assert message.startswith("line 3:"), message
    assert_nothing_stored(sender, before)


def test_blank_lines_count_towards_the_line_number_as_in_an_editor(sender):
    before = seed_run(sender)
    body = (point_line(3) + "\n\n" + point_line(4) + "\n" + point_line(-5) + "\n").encode()
    response = sender.post(body, content_type=NDJSON)
    message = assert_rejected(response, 400, "lines[4].step", "step must be an integer from 0", "-5")
    assert message.startswith("line 4:"), message
    assert_nothing_stored(sender, before)


def test_a_line_of_unknown_type_is_rejected(sender):
    before = seed_run(sender)
    body = ndjson(point_line(3), '{"type": "metric", "run": "%s", "step": 4, "metric": "loss", "value": 1}' % RUN_ID)
    response = sender.post(body, content_type=NDJSON)
    message = assert_rejected(response, 400, "lines[2].type", "type must be one of run, phase, point, event", "'metric'")
    assert message.startswith("line 2:"), message
    assert_nothing_stored(sender, before)


def test_a_line_that_is_not_an_object_is_rejected(sender):
    before = seed_run(sender)
    body = ndjson(point_line(3), "[4, 1.0]")
    response = sender.post(body, content_type=NDJSON)
    message = assert_rejected(response, 400, "lines[2]", "must be a JSON object", "array")
    assert message.startswith("line 2:"), message
    assert_nothing_stored(sender, before)


def test_a_line_for_another_run_is_rejected(sender):
    before = seed_run(sender)
    body = ndjson(point_line(3), point_line(4, run="some-other-run"))
    response = sender.post(body, content_type=NDJSON)
    message = assert_rejected(response, 400, "lines[2].run", "'some-other-run'", "one run per request")
    assert message.startswith("line 2:"), message
    assert_nothing_stored(sender, before)
    assert sender.get("/api/v1/runs/some-other-run/").status_code == 404


def test_an_unknown_field_on_a_line_is_rejected(sender):
    before = seed_run(sender)
    body = ndjson(point_line(3), '{"type": "point", "run": "%s", "step": 4, "metric": "loss", "value": 1, "unit": "nats"}' % RUN_ID)
    response = sender.post(body, content_type=NDJSON)
    message = assert_rejected(response, 400, "lines[2].unit", "unknown field", "'unit'")
    assert message.startswith("line 2:"), message
    assert_nothing_stored(sender, before)
