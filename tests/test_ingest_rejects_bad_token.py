"""No token, or a token the console does not know, is 401 at path "Authorization", and nothing is stored."""
import pytest
from django.utils import timezone

from ingest.models import ProjectToken
from tests.ingest_rejects_support import RUN_ID, assert_nothing_stored, assert_rejected, batch, good_point, seed_run

pytestmark = pytest.mark.django_db

BATCH = batch(good_point(3), good_point(4), run={"id": RUN_ID, "name": "renamed by a stranger"})


def assert_challenge(response):
    assert response["WWW-Authenticate"].startswith("Bearer"), response.headers


def test_no_token_is_401(sender):
    before = seed_run(sender)
    response = sender.post(BATCH, token="")
    assert_rejected(response, 401, "Authorization", "credentials were not provided")
    assert_challenge(response)
    assert_nothing_stored(sender, before)


def test_wrong_token_is_401(sender, token):
    before = seed_run(sender)
    wrong = token[:-4] + ("aaaa" if not token.endswith("aaaa") else "bbbb")
    response = sender.post(BATCH, token=wrong)
    assert_rejected(response, 401, "Authorization", "unknown or revoked token")
    assert_challenge(response)
    assert_nothing_stored(sender, before)


def test_token_with_the_wrong_scheme_is_401(sender, token):
    before = seed_run(sender)
    response = sender.post(BATCH, token="", headers={"Authorization": f"Token {token}"})
    assert_rejected(response, 401, "Authorization", "Bearer <token>")
    assert_nothing_stored(sender, before)


def test_revoked_token_is_401(sender, project):
    before = seed_run(sender)
    record, raw = ProjectToken.issue(project)
    record.revoked_at = timezone.now()
    record.save()
    response = sender.post(BATCH, token=raw)
    assert_rejected(response, 401, "Authorization", "unknown or revoked token")
    assert_nothing_stored(sender, before)


def test_no_token_with_an_invalid_body_is_still_401_not_400(sender):
    # Authentication comes first: a stranger learns nothing about what the contract would say.
    before = seed_run(sender)
    response = sender.post({"run": {"id": RUN_ID}, "points": [good_point(-1)]}, token="")
    assert_rejected(response, 401, "Authorization")
    assert_nothing_stored(sender, before)
