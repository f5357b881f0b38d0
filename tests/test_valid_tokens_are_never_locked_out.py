"""A valid token is never refused because other tokens failed from its address (a NAT, a proxy, a rotation).

The per-address guess limit (TOKEN_FAILURES_PER_ADDRESS distinct bad tokens, 20) still
refuses every unknown token from that address, so a guesser is stopped; but the jobs and
people behind the same address who send tokens the console knows carry on.
"""
import pytest
from django.conf import settings

from ingest.models import Run
from opsconsole.models import PersonalToken
from tests import token_support
from tests.token_support import assert_throttled, guess

pytestmark = pytest.mark.django_db
NAT = "198.51.100.23"


def ingest(token, address=NAT):
    return token_support.ingest(token, address, "behind-the-nat")


def read(token, address=NAT):
    return token_support.read(token, address)


def test_valid_tokens_work_from_an_address_that_sent_25_bad_ones(token, owner, project):
    _, personal = PersonalToken.issue(owner)
    limit = settings.TOKEN_FAILURES_PER_ADDRESS
    answers = [ingest(guess()).status_code for _ in range(25)]
    assert answers == [401] * limit + [429] * (25 - limit)

    assert ingest(token).status_code == 202  # the fleet's telemetry keeps flowing
    assert Run.objects.filter(project=project, run_id="behind-the-nat").exists()
    reading = read(personal)
    assert reading.status_code == 200, reading.content
    assert [run["id"] for run in reading.json()["results"]] == ["behind-the-nat"]  # the owner sees what the job just sent

    assert_throttled(ingest(guess()))  # the 26th bad token: the guesser is still refused
    assert_throttled(read(guess(PersonalToken.PREFIX)))


def test_a_token_issued_during_a_rotation_works_from_an_address_over_the_limit(project):
    from ingest.models import ProjectToken

    for _ in range(settings.TOKEN_FAILURES_PER_ADDRESS + 5):
        ingest(guess())  # the old, revoked tokens still in some jobs' configs, and a misconfigured one
    assert_throttled(ingest(guess()))
    _, fresh = ProjectToken.issue(project)
    # Every batch, well past both limits: a valid token's own traffic is never counted as failures either.
    answers = [ingest(fresh).status_code for _ in range(settings.TOKEN_FAILURES_PER_ADDRESS + settings.TOKEN_FAILURES_PER_TOKEN)]
    assert answers == [202] * len(answers)


def test_using_a_valid_token_does_not_let_the_address_guess_again(token):
    for _ in range(settings.TOKEN_FAILURES_PER_ADDRESS):
        assert ingest(guess()).status_code == 401
    assert ingest(token).status_code == 202
    assert_throttled(ingest(guess()))  # a success from the address resets nothing
