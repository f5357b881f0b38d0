"""Only application/json and application/x-ndjson are read: anything else is 415 at path "Content-Type"."""
import orjson
import pytest
from django.test.client import FakePayload

from tests.ingest_rejects_support import RUN_ID, assert_nothing_stored, assert_rejected, batch, good_point, seed_run

pytestmark = pytest.mark.django_db

BODY = orjson.dumps(batch(good_point(3), good_point(4)))


def test_text_plain_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(BODY, content_type="text/plain")
    assert_rejected(response, 415, "Content-Type", "unsupported content type", "'text/plain'", "application/json")
    assert_nothing_stored(sender, before)


def test_form_encoding_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(BODY, content_type="application/x-www-form-urlencoded")
    assert_rejected(response, 415, "Content-Type", "unsupported content type", "application/x-ndjson")
    assert_nothing_stored(sender, before)


def test_empty_content_type_header_is_rejected(sender):
    before = seed_run(sender)
    response = sender.post(BODY, content_type="")
    assert_rejected(response, 415, "Content-Type", "unsupported content type", "(none)")
    assert_nothing_stored(sender, before)


def test_request_without_a_content_type_header_is_rejected(sender, token):
    # Django's test client always sets CONTENT_TYPE when there is a body; build the request
    # by hand so the header is absent, as it is from `curl --data-binary @file` with -H removed.
    before = seed_run(sender)
    response = sender.client.request(
        REQUEST_METHOD="POST",
        PATH_INFO="/api/v1/ingest",
        CONTENT_LENGTH=str(len(BODY)),
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **{"wsgi.input": FakePayload(BODY)},
    )
    assert_rejected(response, 415, "Content-Type", "unsupported content type", "(none)")
    assert_nothing_stored(sender, before)


def test_json_with_a_charset_parameter_is_accepted(sender):
    # Control: the media type is compared without its parameters.
    seed_run(sender)
    response = sender.post(BODY, content_type="application/json; charset=utf-8")
    assert response.status_code == 202, response.content
    loss = sender.get(f"/api/v1/runs/{RUN_ID}/points/", metric="loss").json()["points"]
    assert loss == [{"step": s, "value": v} for s, v in ((0, 3.0), (1, 2.5), (2, 2.25), (3, 1.0), (4, 1.0))]
