"""Every query parameter and id in a URL is checked against what the schema says it is: a 4xx naming it, never a 500.

An integer beyond 64 bits (`?rule=99999999999999999999`) reached SQLite, which
cannot bind it (500); values outside a parameter's documented range or choices
were silently ignored or answered 200 with nothing, so the schema's constraints
were not the API's. Ids beyond any row are simply not found (404).
"""
import pytest
from django.test import Client

from opsconsole.models import PersonalToken
from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db

HUGE = "99999999999999999999"

BAD = [
    ("/api/v1/inbox/?rule=" + HUGE, "rule"),
    ("/api/v1/inbox/?rule=0", "rule"),
    ("/api/v1/inbox/?rule=abc", "rule"),
    ("/api/v1/inbox/?state=closed", "state"),
    ("/api/v1/inbox/?limit=0", "limit"),
    ("/api/v1/inbox/?limit=501", "limit"),
    ("/api/v1/inbox/?offset=-1", "offset"),
    ("/api/v1/inbox/?offset=" + HUGE, "offset"),
    ("/api/v1/inbox/?run=a%20b", "run"),
    ("/api/v1/inbox/?project=not%20a%20slug", "project"),
    ("/api/v1/runs/r1/points/", "metric"),
    ("/api/v1/runs/r1/points/?metric=loss&start=" + HUGE, "start"),
    ("/api/v1/runs/r1/points/?metric=loss&end=-1", "end"),
    ("/api/v1/runs/r1/points/?metric=loss&start=1.5", "start"),
    ("/api/v1/runs/r1/points/?metric=loss&attempt=every", "attempt"),
    ("/api/v1/runs/r1/points/?metric=bad%20name", "metric"),
    ("/api/v1/runs/r1/points/?metric=loss%0A", "metric"),
    ("/api/v1/runs/r1/points/?metric=loss&component=a%20b", "component"),
    ("/api/v1/runs/r1/events/?start=" + HUGE, "start"),
    ("/api/v1/runs/r1/events/?condition=on_fire", "condition"),
    ("/api/v1/runs/r1/series/?metric=loss&end=" + HUGE, "end"),
    ("/api/v1/runs/r1/series/?metric=loss&buckets=" + HUGE, "buckets"),
    ("/api/v1/runs/r1/series/?metric=loss&buckets=0", "buckets"),
    ("/api/v1/runs/r1/series/?metric=loss&band=maybe", "band"),
    ("/api/v1/alerts/", "run"),
    ("/api/v1/alerts/?run=" + "r" * 129, "run"),
]


@pytest.fixture
def reader(sender, owner, project):
    points = [{"step": s, "metric": "loss", "value": 1.0} for s in range(5)]
    assert sender.post({"run": {"id": "r1"}, "points": points}).status_code == 202
    make_alert(make_rule(project, kind="nonfinite"), run="r1")
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {PersonalToken.issue(owner)[1]}"
    return client


@pytest.mark.parametrize("url, param", BAD)
def test_a_bad_query_parameter_is_a_400_naming_it(reader, url, param):
    response = reader.get(url)
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert {e["path"] for e in response.json()["errors"]} == {param}, response.json()


@pytest.mark.parametrize("url", [
    "/api/v1/inbox/?rule=9223372036854775807&limit=500&offset=9223372036854775807",
    "/api/v1/inbox/?state=all&run=r1&project=pretrain",
    "/api/v1/runs/r1/points/?metric=loss&start=0&end=9007199254740991&attempt=all",
    "/api/v1/runs/r1/points/?metric=loss&component=",
    "/api/v1/runs/r1/events/?start=0&end=9007199254740991&condition=dead",
    "/api/v1/runs/r1/series/?metric=loss&buckets=5000&band=true",
    "/api/v1/alerts/?run=r1",
])
def test_the_edges_of_each_range_are_accepted(reader, url):
    assert reader.get(url).status_code == 200, reader.get(url).content[:300]


@pytest.mark.parametrize("path", [f"/api/v1/alerts/{HUGE}/", f"/api/v1/rules/{HUGE}/", "/api/v1/alerts/9223372036854775808/"])
def test_an_id_beyond_any_row_is_not_found(reader, path):
    assert reader.get(path).status_code == 404


@pytest.mark.parametrize("url", [f"/inbox/?rule={HUGE}", "/inbox/?rule=-1", f"/inbox/?page={HUGE}"])
def test_the_inbox_page_names_a_bad_rule_filter_instead_of_failing(client, owner, project, url):
    make_alert(make_rule(project, kind="nonfinite"))
    client.force_login(owner)
    response = client.get(url)
    assert response.status_code == 200
    if "rule" in url:
        assert "rule must be a rule id" in response.content.decode()


@pytest.mark.parametrize("url", [f"/rules/{HUGE}/", f"/inbox/alerts/{HUGE}/acknowledge/"])
def test_console_ids_beyond_any_row_are_not_found(client, owner, url):
    client.force_login(owner)
    response = client.post(url) if "acknowledge" in url else client.get(url)
    assert response.status_code == 404
