"""A body that is not JSON (or not a JSON object) is a 400 naming the body, and nothing is stored."""
import pytest

from tests.ingest_rejects_support import RUN_ID, assert_nothing_stored, assert_rejected, seed_run

pytestmark = pytest.mark.django_db


def test_truncated_json_is_rejected_with_where_it_broke(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1.0}' % RUN_ID
    response = sender.post(body)
    message = assert_rejected(response, 400, "", "malformed JSON", "line 1 column")
    assert message.startswith("malformed JSON")
    assert_nothing_stored(sender, before)


def test_single_quoted_python_repr_is_rejected_as_malformed_json(sender):
    before = seed_run(sender)
    body = "{'run': {'id': '%s'}, 'points': [{'step': 3, 'metric': 'loss', 'value': 1.0}]}" % RUN_ID
    assert_rejected(sender.post(body), 400, "", "malformed JSON", "property name")
    assert_nothing_stored(sender, before)


def test_trailing_garbage_after_the_object_is_rejected(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1.0}]} trailing' % RUN_ID
    assert_rejected(sender.post(body), 400, "", "malformed JSON", "extra data")
    assert_nothing_stored(sender, before)


def test_a_json_array_instead_of_an_object_is_rejected(sender):
    before = seed_run(sender)
    body = '[{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1.0}]}]' % RUN_ID
    assert_rejected(sender.post(body), 400, "", "must be a JSON object", "array")
    assert_nothing_stored(sender, before)


def test_a_body_that_is_not_utf8_is_rejected(sender):
    before = seed_run(sender)
    body = ('{"run": {"id": "%s", "name": "' % RUN_ID).encode() + b"caf\xe9" + b'"}}'
    assert_rejected(sender.post(body), 400, "", "not UTF-8")
    assert_nothing_stored(sender, before)


def test_nesting_deeper_than_the_parser_allows_is_a_400_not_a_server_error(sender):
    before = seed_run(sender)
    deep = "[" * 100_000 + "]" * 100_000
    body = '{"run": {"id": "%s", "config": {"k": %s}}}' % (RUN_ID, deep)
    assert_rejected(sender.post(body), 400, "", "malformed JSON", "nested too deeply")
    assert_nothing_stored(sender, before)


def test_an_integer_literal_too_long_for_python_is_a_400_not_a_server_error(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s"}, "points": [{"step": 3, "metric": "loss", "value": 1%s}]}' % (RUN_ID, "0" * 5000)
    assert_rejected(sender.post(body), 400, "", "malformed JSON", "digits")
    assert_nothing_stored(sender, before)


def test_an_unpaired_surrogate_escape_is_a_400_not_a_server_error(sender):
    before = seed_run(sender)
    body = '{"run": {"id": "%s", "name": "bad \\ud800 name"}}' % RUN_ID
    assert_rejected(sender.post(body), 400, "", "malformed JSON", "surrogate")
    assert_nothing_stored(sender, before)


def test_a_properly_paired_surrogate_escape_is_still_accepted(sender):
    # Control for the case above: an escaped emoji is valid JSON and valid Unicode.
    body = '{"run": {"id": "emoji-run", "name": "rocket \\ud83d\\ude80"}, "points": [{"step": 1, "metric": "loss", "value": NaN}]}'
    assert sender.post(body).status_code == 202
    assert sender.get("/api/v1/runs/emoji-run/").json()["name"] == "rocket \U0001F680"
