"""Who may read a run: members of its project and its project's tokens; nobody else learns it exists."""
import pytest

pytestmark = pytest.mark.django_db
ENDPOINTS = [
    "/api/v1/runs/shared-run/",
    "/api/v1/runs/shared-run/points/?metric=loss",
    "/api/v1/runs/shared-run/events/",
]


@pytest.fixture
def stored_run(sender):
    sender.post({"run": {"id": "shared-run"}, "points": [{"step": 1, "metric": "loss", "value": 2.0}]})


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_members_read_their_projects_runs(api, stored_run, request, path, who):
    api.force_login(request.getfixturevalue(who))
    assert api.get(path).status_code == 200


@pytest.mark.parametrize("path", ENDPOINTS)
def test_outsider_gets_not_found(api, stored_run, outsider, path):
    api.force_login(outsider)
    assert api.get(path).status_code == 404


@pytest.mark.parametrize("path", ENDPOINTS)
def test_token_of_another_project_gets_not_found(api, stored_run, other_token, path):
    assert api.get(path, HTTP_AUTHORIZATION=f"Bearer {other_token}").status_code == 404


@pytest.mark.parametrize("path", ENDPOINTS + ["/api/v1/runs/"])
def test_anonymous_is_refused(api, stored_run, path):
    response = api.get(path)
    assert response.status_code == 401
    assert response.json()["errors"][0]["path"] == "Authorization"


def test_runs_list_shows_only_visible_runs(api, sender, other_token, owner, outsider):
    sender.post({"run": {"id": "mine"}})
    sender.post({"run": {"id": "theirs"}}, token=other_token)
    api.force_login(owner)
    assert [r["id"] for r in api.get("/api/v1/runs/").json()["results"]] == ["mine"]
    api.force_login(outsider)
    assert [r["id"] for r in api.get("/api/v1/runs/").json()["results"]] == ["theirs"]


def test_console_runs_page_needs_login_and_lists_only_members_runs(client, sender, other_token, owner, outsider):
    sender.post({"run": {"id": "visible-run"}})
    sender.post({"run": {"id": "hidden-run"}}, token=other_token)
    assert client.get("/").status_code == 302
    client.force_login(owner)
    page = client.get("/").content.decode()
    assert "visible-run" in page and "hidden-run" not in page
    client.force_login(outsider)
    page = client.get("/").content.decode()
    assert "hidden-run" in page and "visible-run" not in page
