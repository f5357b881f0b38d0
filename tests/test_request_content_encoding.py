"""Content-Encoding: gzip is inflated (at most to the 4 MiB limit); any other encoding is a 415 naming the header.

Before, an encoded body was read as it came and refused as "not UTF-8" (a 400
that blamed the sender's text). A declared body over 4 MiB is a 413 on every
path before anything reads it.
"""
import gzip
import zlib

import orjson
import pytest

from tests.conftest import stored_counts
from tests.ingest_rejects_support import assert_nothing_stored, assert_rejected, seed_run
from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024
BATCH = {"run": {"id": "zipped"}, "points": [{"step": s, "metric": "loss", "value": 2.0 - s / 100} for s in range(100)]}


def post(sender, body, encoding, content_type="application/json", **headers):
    return sender.post(body, content_type=content_type, headers={"Content-Encoding": encoding, **headers})


@pytest.mark.parametrize("encoding", ["br", "deflate", "zstd", "compress", "gzip, br", "x\x01"])
def test_an_unsupported_encoding_is_a_415_naming_content_encoding(sender, encoding):
    before = seed_run(sender)
    response = post(sender, zlib.compress(orjson.dumps(BATCH)), encoding)
    message = assert_rejected(response, 415, "Content-Encoding", "unsupported Content-Encoding", "gzip")
    assert "UTF-8" not in message
    assert_nothing_stored(sender, before)


@pytest.mark.parametrize("content_type", ["application/json", "application/x-ndjson"])
def test_a_gzip_body_is_stored_as_if_sent_plain(sender, content_type):
    if content_type == "application/json":
        body = orjson.dumps(BATCH)
    else:
        body = b"".join(orjson.dumps({"type": "point", "run": "zipped", **p}) + b"\n" for p in BATCH["points"])
    response = post(sender, gzip.compress(body), "gzip", content_type)
    assert response.status_code == 202, response.content
    stored = sender.get("/api/v1/runs/zipped/points/", metric="loss").json()["points"]
    assert [p["value"] for p in stored] == [p["value"] for p in BATCH["points"]]


def test_identity_is_the_body_as_sent(sender):
    assert post(sender, orjson.dumps(BATCH), "identity").status_code == 202


def test_a_gzip_bomb_is_a_413_after_inflating_no_more_than_4_mib(sender):
    before = seed_run(sender)
    bomb = gzip.compress(b" " * (64 * MIB), compresslevel=9)  # 64 KiB on the wire
    assert len(bomb) < 100_000
    assert_rejected(post(sender, bomb, "gzip"), 413, "", "4 MiB")
    assert_nothing_stored(sender, before)


def test_a_body_of_exactly_4_mib_inflated_is_taken(sender):
    body = orjson.dumps(BATCH)
    body += b" " * (4 * MIB - len(body))
    assert post(sender, gzip.compress(body), "gzip").status_code == 202


def test_a_body_that_is_not_gzip_is_a_400_naming_content_encoding(sender):
    before = seed_run(sender)
    assert_rejected(post(sender, orjson.dumps(BATCH), "gzip"), 400, "Content-Encoding", "not valid gzip")
    assert_rejected(post(sender, gzip.compress(orjson.dumps(BATCH))[:-12], "gzip"), 400, "Content-Encoding", "ends early")
    assert_nothing_stored(sender, before)


def test_other_api_bodies_take_gzip_and_refuse_other_encodings(api, oncall, project):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    api.force_login(oncall)
    body = orjson.dumps({"scope": "run", "reason": "flaky node", "duration_minutes": 60})
    response = api.generic("POST", f"/api/v1/alerts/{alert.pk}/mute/", zlib.compress(body), content_type="application/json",
                           HTTP_CONTENT_ENCODING="deflate")
    assert response.status_code == 415 and response.json()["errors"][0]["path"] == "Content-Encoding"
    response = api.generic("POST", f"/api/v1/alerts/{alert.pk}/mute/", gzip.compress(body), content_type="application/json",
                           HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("path", ["/api/v1/ingest", "/api/v1/rules/", "/accounts/login/"])
def test_a_declared_body_over_4_mib_is_a_413_before_it_is_read(client, path):
    counts = stored_counts()
    response = client.generic("POST", path, b"{}", content_type="application/json", CONTENT_LENGTH=str(4 * MIB + 1))
    assert response.status_code == 413
    if path.startswith("/api/"):
        assert response.json()["errors"][0]["path"] == "" and "4 MiB" in response.json()["errors"][0]["message"]
    assert stored_counts() == counts
