"""A valid token of the other kind is a 401 that says which kind the endpoint takes, and never counts as a guess.

Ingest and the Alertmanager webhook take project tokens only; a personal token
sent there (a script pointed at the wrong endpoint) must not be called unknown,
nor lock its owner out of the API by the bad-token throttle.
"""
import secrets

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import path
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response
from rest_framework.test import APIClient
from rest_framework.views import APIView

from ingest.auth import PersonalTokenAuthentication
from ingest.models import TOKEN_PREFIX
from opsconsole.models import PersonalToken
from tests.conftest import stored_counts

pytestmark = pytest.mark.django_db
ADDRESS = "203.0.113.50"
BATCH = {"run": {"id": "wrong-kind"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]}
TAKES_PROJECT = "this endpoint takes a project token; this is a personal token"


def call(method, url, token, body=None):
    return getattr(APIClient(), method)(url, body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=ADDRESS)


def assert_wrong_kind(response, message):
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"].startswith("Bearer"), response.headers
    assert response.json()["errors"] == [{"path": "Authorization", "message": message}]


def test_a_personal_token_on_ingest_says_so_every_time_and_still_reads_afterwards(owner):
    _, personal = PersonalToken.issue(owner)
    before = stored_counts()
    for _ in range(settings.TOKEN_FAILURES_PER_TOKEN + 5):  # past the per-token limit: none of these is a failure
        assert_wrong_kind(call("post", "/api/v1/ingest", personal, BATCH), TAKES_PROJECT)
    assert stored_counts() == before
    assert call("get", "/api/v1/runs/", personal).status_code == 200
    assert call("get", "/api/v1/rules/", personal).status_code == 200


def test_a_personal_token_on_the_alertmanager_webhook_says_so(owner):
    _, personal = PersonalToken.issue(owner)
    response = call("post", "/api/v1/alertmanager", personal, {"version": "4", "status": "firing", "alerts": []})
    assert_wrong_kind(response, TAKES_PROJECT)


def test_personal_tokens_on_ingest_do_not_count_towards_the_address_guess_limit(django_user_model, token):
    # As many people as the address limit, each pointing a script at ingest by mistake ...
    for i in range(settings.TOKEN_FAILURES_PER_ADDRESS + 5):
        user = django_user_model.objects.create_user(f"scripter{i}")
        assert_wrong_kind(call("post", "/api/v1/ingest", PersonalToken.issue(user)[1], BATCH), TAKES_PROJECT)
    # ... leave the address's count where it was: an unknown token is still a plain 401, not a 429.
    unknown = call("post", "/api/v1/ingest", TOKEN_PREFIX + secrets.token_urlsafe(32), BATCH)
    assert unknown.status_code == 401 and unknown.json()["errors"][0]["message"] == "unknown or revoked token"
    assert call("post", "/api/v1/ingest", token, BATCH).status_code == 202


def test_an_unknown_personal_token_on_ingest_is_still_unknown(owner):
    response = call("post", "/api/v1/ingest", PersonalToken.PREFIX + secrets.token_urlsafe(32), BATCH)
    assert response.status_code == 401
    assert response.json()["errors"] == [{"path": "Authorization", "message": "unknown or revoked token"}]


class PeopleOnly(APIView):
    """An endpoint for people (a personal token or the console's session), as an admin action would be."""

    authentication_classes = [PersonalTokenAuthentication, SessionAuthentication]

    def get(self, request):
        return Response({"user": request.user.get_username()})


urlpatterns = [path("people-only/", PeopleOnly.as_view())]


def test_a_project_token_where_only_people_are_served_says_so_and_is_not_a_guess(token, owner):
    with override_settings(ROOT_URLCONF=__name__):
        for _ in range(settings.TOKEN_FAILURES_PER_TOKEN + 5):
            assert_wrong_kind(call("get", "/people-only/", token),
                              "this endpoint takes a personal token or the console's session; this is a project token")
        assert call("get", "/people-only/", PersonalToken.issue(owner)[1]).json() == {"user": "olivia"}
    assert call("post", "/api/v1/ingest", token, BATCH).status_code == 202  # the job's token was not counted against


def test_a_project_token_still_reads_where_both_kinds_are_taken(token):
    assert call("get", "/api/v1/runs/", token).status_code == 200
