"""Who may export: members of the project (any role) and its token; nobody else learns the run or project exists."""
import pytest
from rest_framework.test import APIClient

from tests.export_support import body_of, strict_lines
from tests.factories import client_for

pytestmark = pytest.mark.django_db
PATHS = ["/api/v1/runs/exp-a/export/", "/api/v1/runs/exp/b/export/?format=jsonl", "/api/v1/projects/pretrain/export/"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_members_export_their_projects_runs(exported, request, path, who):
    lines = strict_lines(body_of(client_for(request.getfixturevalue(who)).get(path)))
    assert lines and all(line["project"] == "pretrain" for line in lines)


@pytest.mark.parametrize("path", PATHS)
def test_the_projects_token_exports(exported, token, path):
    assert strict_lines(body_of(APIClient().get(path, HTTP_AUTHORIZATION=f"Bearer {token}")))


@pytest.mark.parametrize("path", PATHS + ["/api/v1/projects/pretrain/export/?types=nonsense"])
def test_an_outsider_gets_not_found(exported, outsider, path):
    response = client_for(outsider).get(path)
    assert response.status_code == 404 and b"pretrain" not in response.content


@pytest.mark.parametrize("path", PATHS)
def test_another_projects_token_gets_not_found(exported, other_token, path):
    assert APIClient().get(path, HTTP_AUTHORIZATION=f"Bearer {other_token}").status_code == 404


def test_the_outsiders_own_project_exports_only_its_own(exported, outsider):
    lines = strict_lines(body_of(client_for(outsider).get("/api/v1/projects/vision/export/")))
    assert {line["run"] for line in lines} == {"hidden"}


@pytest.mark.parametrize("path", PATHS)
def test_anonymous_is_refused(exported, path):
    response = APIClient().get(path)
    assert response.status_code == 401 and response.json()["errors"][0]["path"] == "Authorization"
