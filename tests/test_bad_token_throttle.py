"""Bad bearer tokens (project and personal) are throttled: 429 with Retry-After at path "Authorization".

Per token (TOKEN_FAILURES_PER_TOKEN, 10) and per address counting distinct bad
tokens (TOKEN_FAILURES_PER_ADDRESS, 20), within AUTH_FAILURE_WINDOW_SECONDS.
Valid tokens never count and are never refused (tests/test_valid_tokens_are_never_locked_out.py),
and one job repeating a revoked token blocks only that token.
"""
import pytest
from django.conf import settings

from opsconsole.models import PersonalToken
from tests import token_support
from tests.token_support import assert_throttled, guess

pytestmark = pytest.mark.django_db


def ingest(token, address="203.0.113.7"):
    return token_support.ingest(token, address, "throttled")


def read(token, address="203.0.113.7"):
    return token_support.read(token, address)


def test_an_address_guessing_project_tokens_is_throttled():
    assert [ingest(guess()).status_code for _ in range(settings.TOKEN_FAILURES_PER_ADDRESS)] == [401] * settings.TOKEN_FAILURES_PER_ADDRESS
    assert_throttled(ingest(guess()))
    assert_throttled(ingest(guess(PersonalToken.PREFIX)))
    assert ingest(guess(), address="192.0.2.1").status_code == 401  # other addresses are not


def test_personal_tokens_are_throttled_the_same_way():
    for _ in range(settings.TOKEN_FAILURES_PER_ADDRESS):
        assert read(guess(PersonalToken.PREFIX)).status_code == 401
    assert_throttled(read(guess(PersonalToken.PREFIX)))
    assert_throttled(read(guess()))
    assert read(guess(PersonalToken.PREFIX), address="192.0.2.1").status_code == 401


def test_a_job_repeating_a_revoked_token_blocks_only_that_token(token):
    revoked = guess()
    answers = [ingest(revoked).status_code for _ in range(3 * settings.TOKEN_FAILURES_PER_TOKEN)]
    assert answers == [401] * settings.TOKEN_FAILURES_PER_TOKEN + [429] * (2 * settings.TOKEN_FAILURES_PER_TOKEN)
    assert_throttled(ingest(revoked))
    assert ingest(token).status_code == 202  # the other jobs behind the same address carry on


def test_jobs_sending_valid_tokens_are_never_throttled(token, project):
    from ingest.models import ProjectToken

    tokens = [token] + [ProjectToken.issue(project)[1] for _ in range(3)]
    for i in range(100):
        assert ingest(tokens[i % len(tokens)]).status_code in (200, 202)
