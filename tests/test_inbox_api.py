"""GET /api/v1/inbox/: alerts across the runs the caller may see, newest first, filtered, paged."""
import pytest

from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def mixed(rule, project, other_project):
    spike = make_rule(project, name="loss-spike", kind="threshold")
    return {
        "firing": make_alert(rule, "run-a", "layers.0"),
        "acknowledged": make_alert(rule, "run-a", "layers.1", state="acknowledged"),
        "muted": make_alert(spike, "run-b", "", state="muted"),
        "resolved": make_alert(rule, "run-b", "layers.2", state="resolved", reviewed=True),
        "theirs": make_alert(make_rule(other_project, name="their-rule", kind="nonfinite"), "their-run"),
    }


def ids(response):
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["results"]]


@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_members_get_their_projects_open_alerts_newest_first(api, request, mixed, who):
    api.force_login(request.getfixturevalue(who))
    response = api.get("/api/v1/inbox/")
    assert ids(response) == [mixed["muted"].pk, mixed["acknowledged"].pk, mixed["firing"].pk]
    item = response.json()["results"][0]
    assert (item["project"], item["run"], item["rule"]["name"], item["state"]) == ("pretrain", "run-b", "loss-spike", "muted")
    assert {"owner", "permitted_response", "diagnostic_url"} <= set(item["rule"])
    assert {"component", "metric", "step", "fired_step", "magnitude", "magnitude_unit", "phase"} <= set(item)


def test_an_outsider_gets_only_their_own(api, outsider, mixed):
    api.force_login(outsider)
    assert ids(api.get("/api/v1/inbox/", {"state": "all"})) == [mixed["theirs"].pk]
    assert ids(api.get("/api/v1/inbox/", {"project": "pretrain"})) == []
    assert ids(api.get("/api/v1/inbox/", {"run": "run-a"})) == []


def test_anonymous_is_refused(api, mixed):
    response = api.get("/api/v1/inbox/")
    assert response.status_code == 401 and response.json()["errors"][0]["path"] == "Authorization"


def test_a_project_token_sees_its_project(api, token, mixed):
    assert len(ids(api.get("/api/v1/inbox/", {"state": "all"}, HTTP_AUTHORIZATION=f"Bearer {token}"))) == 4


def test_filters(api, owner, mixed):
    api.force_login(owner)
    for state in ("firing", "acknowledged", "muted", "resolved"):
        assert ids(api.get("/api/v1/inbox/", {"state": state})) == [mixed[state].pk]
    assert len(ids(api.get("/api/v1/inbox/", {"state": "all"}))) == 4
    assert ids(api.get("/api/v1/inbox/", {"state": "all", "run": "run-b"})) == [mixed["resolved"].pk, mixed["muted"].pk]
    assert ids(api.get("/api/v1/inbox/", {"state": "all", "rule": mixed["muted"].rule_id})) == [mixed["muted"].pk]
    assert len(ids(api.get("/api/v1/inbox/", {"state": "all", "project": "pretrain"}))) == 4


@pytest.mark.parametrize("params, field", [({"state": "closed"}, "state"), ({"rule": "loss-spike"}, "rule")])
def test_a_bad_filter_is_a_400_naming_it(api, owner, mixed, params, field):
    api.force_login(owner)
    response = api.get("/api/v1/inbox/", params)
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == [field]


def test_pages(api, owner, rule):
    made = [make_alert(rule, f"run-{i}") for i in range(5)]
    api.force_login(owner)
    first = api.get("/api/v1/inbox/", {"limit": 2}).json()
    assert first["count"] == 5 and [a["id"] for a in first["results"]] == [made[4].pk, made[3].pk]
    second = api.get(first["next"]).json()
    assert [a["id"] for a in second["results"]] == [made[2].pk, made[1].pk]


def test_the_schema_documents_the_triage_endpoints(client):
    paths = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()["paths"]
    for action in ("acknowledge", "resolve", "verdict", "mute"):
        assert "post" in paths[f"/api/v1/alerts/{{id}}/{action}/"]
    assert "get" in paths["/api/v1/alerts/{id}/"] and "get" in paths["/api/v1/inbox/"]
