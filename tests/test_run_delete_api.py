"""DELETE /api/v1/runs/<id>/: the project's rule admins (the owner included) delete a run; a viewer or
on-call member gets 403, an outsider 404 (the run is not theirs to see), and the run stays."""
import pytest

from ingest.models import Run
from opsconsole.models import Membership, Role
from tests.factories import client_for
from tests.retention_support import fired_alert, send_points, stored_points

pytestmark = pytest.mark.django_db


@pytest.fixture
def rule_admin(django_user_model, project):
    user = django_user_model.objects.create_user("rita", password="pw-rita")
    Membership.objects.create(user=user, project=project, role=Role.RULE_ADMIN)
    return user


@pytest.fixture
def run(sender):
    run = send_points(sender, "doomed-run")
    fired_alert(run)
    return run


@pytest.mark.parametrize("who", ["owner", "rule_admin"])
def test_a_rule_admin_deletes_the_run(request, who, run):
    answer = client_for(request.getfixturevalue(who)).delete("/api/v1/runs/doomed-run/")
    assert answer.status_code == 202, answer.content
    assert answer.json() == {"run": "doomed-run", "archived": False, "queued": True}
    assert not Run.objects.filter(run_id="doomed-run").exists()
    assert client_for(request.getfixturevalue(who)).get("/api/v1/runs/doomed-run/").status_code == 404


@pytest.mark.parametrize("who, status", [("teammate", 403), ("oncall", 403), ("outsider", 404), (None, 401)])
def test_others_cannot_delete_it(request, who, status, run, api):
    client = client_for(request.getfixturevalue(who)) if who else api
    answer = client.delete("/api/v1/runs/doomed-run/")
    assert answer.status_code in ((401, 403) if who is None else (status,)), answer.content
    assert Run.objects.filter(run_id="doomed-run").exists() and stored_points(run) > 0


def test_the_jobs_token_cannot_delete_its_run(sender, run):
    answer = sender.client.delete("/api/v1/runs/doomed-run/", HTTP_AUTHORIZATION=f"Bearer {sender.token}")
    assert answer.status_code == 403
    assert Run.objects.filter(run_id="doomed-run").exists()
