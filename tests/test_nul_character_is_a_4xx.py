"""A NUL character (%00) anywhere a request can carry one is a 4xx naming where, never a 500.

PostgreSQL cannot compare or store text holding NUL, so a NUL in a URL path or
a query parameter used to reach the database and fail there (500 on every
API read and console page). API paths answer the API's error body; console pages
Django's 400. Text fields of a body name the field. The `postgres` run is the one
that failed before (CI runs this file there); the same answers are required on SQLite.
"""
import pytest
from django.test import Client

from opsconsole.models import PersonalToken
from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db(transaction=True)

API_READS = [
    ("/api/v1/runs/a%00b/", "url"),
    ("/api/v1/runs/r1/points/?metric=lo%00ss", "metric"),
    ("/api/v1/runs/r1/points/?metric=loss&component=a%00", "component"),
    ("/api/v1/runs/r1/events/?condition=%00", "condition"),
    ("/api/v1/runs/r1/series/?metric=%00", "metric"),
    ("/api/v1/alerts/?run=%00", "run"),
    ("/api/v1/inbox/?project=%00", "project"),
    ("/api/v1/inbox/?run=x%00", "run"),
    ("/api/v1/rules/?project=%00", "project"),
    ("/api/v1/runs/?unused=%00", "unused"),
    ("/api/v1/runs/?a%00b=1", "a\\u0000b"),
]
CONSOLE_PAGES = ["/?tag=%00", "/?project=%00", "/?tag=a%00=b", "/runs/a%00/", "/inbox/?project=%00", "/rules/?project=%00"]


@pytest.fixture
def seeded(sender, owner):
    assert sender.post({"run": {"id": "r1"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]}).status_code == 202
    return PersonalToken.issue(owner)[1]


def test_nul_in_an_api_url_is_a_400_naming_where(seeded, sender):
    for url, where in API_READS:
        for auth in (sender.token, seeded):
            response = Client().get(url, HTTP_AUTHORIZATION=f"Bearer {auth}")
            assert response.status_code == 400, (url, response.status_code, response.content[:200])
            assert response.json()["errors"][0]["path"] == where, (url, response.json())
            assert "NUL" in response.json()["errors"][0]["message"]


def test_nul_in_the_ingest_url_is_a_400_and_stores_nothing(sender):
    response = sender.client.generic("POST", "/api/v1/ingest?x=%00", b'{"run": {"id": "r2"}}', content_type="application/json",
                                     HTTP_AUTHORIZATION=f"Bearer {sender.token}")
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == "x"
    assert sender.get("/api/v1/runs/r2/").status_code == 404


def test_nul_in_a_console_url_is_a_400_page(seeded, owner):
    client = Client()
    client.force_login(owner)
    for url in CONSOLE_PAGES:
        assert client.get(url).status_code == 400, url


def test_nul_in_text_of_an_api_body_names_the_field(api, oncall, project):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    api.force_login(oncall)
    for action, body, field in [
        ("mute", {"scope": "run", "reason": "flaky\x00node", "duration_minutes": 60}, "reason"),
        ("resolve", {"note": "done\x00"}, "note"),
        ("verdict", {"verdict": "false_alarm", "note": "\x00"}, "note"),
        ("mute", {"scope": "run", "reason": "x", "duration_minutes": 60, "extra": {"k\x00": 1}}, "extra.k\x00"),
    ]:
        response = api.post(f"/api/v1/alerts/{alert.pk}/{action}/", body, format="json")
        assert response.status_code == 400, (action, response.content)
        assert [e["path"] for e in response.json()["errors"]] == [field], response.json()
    assert alert.changes.count() == 1  # only its "fired" row: nothing was acted on


def test_nul_in_an_inbox_form_field_is_shown_beside_the_field(client, oncall, project):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    client.force_login(oncall)
    response = client.post(f"/inbox/alerts/{alert.pk}/mute/", {"scope": "run", "reason": "bad\x00node", "duration_minutes": "60"})
    assert response.status_code == 400
    assert 'data-field="reason"' in response.content.decode() and "NUL" in response.content.decode()
    response = client.post(f"/inbox/alerts/{alert.pk}/resolve/", {"note": "\x00"})
    assert response.status_code == 400 and 'data-field="note"' in response.content.decode()
    assert alert.changes.count() == 1
