"""An empty body says nothing: 400 naming the body (path ""), nothing stored."""
import pytest

from tests.ingest_rejects_support import assert_nothing_stored, assert_rejected, seed_run

pytestmark = pytest.mark.django_db


def test_empty_json_body_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(b"", content_type="application/json")
    assert_rejected(response, 400, "", "empty body", "run.id")
    assert_nothing_stored(sender, before)


def test_whitespace_only_json_body_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(b" \n\t\r\n", content_type="application/json")
    assert_rejected(response, 400, "", "empty body")
    assert_nothing_stored(sender, before)


def test_empty_json_object_is_rejected_for_lack_of_a_run(sender):
    before = seed_run(sender)
    response = sender.post(b"{}", content_type="application/json")
    assert_rejected(response, 400, "run", "run is required")
    assert_nothing_stored(sender, before)


def test_empty_ndjson_body_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(b"", content_type="application/x-ndjson")
    assert_rejected(response, 400, "", "empty body", "NDJSON line")
    assert_nothing_stored(sender, before)


def test_ndjson_body_of_blank_lines_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(b"\n\n  \n", content_type="application/x-ndjson")
    assert_rejected(response, 400, "", "empty body")
    assert_nothing_stored(sender, before)
