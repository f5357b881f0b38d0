"""Who starts a backtest and who reads it: rule admins start them (viewers, on-call and project tokens get 403, before
anything is replayed); the project's members and its token read them; anyone else gets 404."""
import pytest
from rest_framework.test import APIClient

from alerts.models import BacktestJob
from opsconsole.models import Membership, Role
from tests.backtest_support import URL, draft, job_of, post
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


def with_token(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def oncall(django_user_model, project):
    user = django_user_model.objects.create_user("oona")
    Membership.objects.create(user=user, project=project, role=Role.ONCALL)
    return user


def test_a_rule_admin_starts_a_backtest_and_gets_202_with_its_url(owner, runs):
    response = post(owner, draft())
    assert response.status_code == 202
    body = response.json()
    assert response["Location"] == body["url"] == f"/api/v1/backtests/{body['id']}/"
    assert body["state"] == "done" and body["result"]["alerts"] == 2


@pytest.mark.parametrize("who", ["teammate", "oncall"])
def test_members_without_the_rule_admin_role_get_403_and_nothing_runs(who, request, project, runs):
    user = request.getfixturevalue(who)
    rule = make_rule(project, kind="band")
    for body in (draft(), {"rule": rule.pk}):
        response = post(user, body)
        assert response.status_code == 403, response.content
        assert "rule admin" in response.json()["errors"][0]["message"]
    assert not BacktestJob.objects.exists()


def test_the_projects_ingest_token_gets_403(token, project, runs):
    rule = make_rule(project, kind="band")
    for body in (draft(), {"rule": rule.pk}):
        assert with_token(token).post(URL, body, format="json").status_code == 403
    assert not BacktestJob.objects.exists()


def test_an_outsider_gets_403_starting_one(outsider, project, runs):
    rule = make_rule(project, kind="band")
    assert post(outsider, {"rule": rule.pk}).status_code == 403
    assert not BacktestJob.objects.exists()


def test_members_and_the_projects_token_read_a_backtest_others_get_404(owner, teammate, oncall, outsider, token,
                                                                       other_token, runs):
    job = job_of(owner, post(owner, draft()))
    for user in (owner, teammate, oncall):
        read = client_for(user).get(job["url"])
        assert read.status_code == 200 and read.json()["result"]["alerts"] == 2
    read = with_token(token).get(job["url"])
    assert read.status_code == 200 and read.json()["result"]["alerts"] == 2
    assert client_for(outsider).get(job["url"]).status_code == 404
    assert with_token(other_token).get(job["url"]).status_code == 404
    assert client_for(None).get(job["url"]).status_code in (401, 403)


def test_members_read_a_backtest_page_outsiders_get_404(owner, teammate, outsider, runs):
    job = job_of(owner, post(owner, draft()))
    page = f"/rules/backtests/{job['id']}/"
    html = client_for(teammate).get(page).content.decode()
    assert "Backtest of draft rule loss-band" in html and "<strong>2</strong> alerts on" in html
    assert client_for(outsider).get(page).status_code == 404
