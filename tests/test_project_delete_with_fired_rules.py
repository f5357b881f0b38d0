"""A project whose rules fired can be deleted (its alerts PROTECT their rule: it used to raise ProtectedError),
by a superuser only: its owner and rule admins get 403, an outsider 404. One whose decision log holds
entries is archived instead: the runs the log names keep everything but their points, its tokens are revoked."""
import pytest

from alerts.models import Alert, Rule
from ingest.models import Project, ProjectToken, Run
from retention.models import ProjectArchive
from tests.factories import client_for
from tests.retention_support import fired_alert, log_entry, send_points, stored_points

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("ada", password="pw-ada")


@pytest.fixture
def fired(project, sender):
    for run_id in ("run-a", "run-b"):
        fired_alert(send_points(sender, run_id))
    assert Alert.objects.filter(rule__project=project).count() == 2


def test_a_superuser_deletes_a_project_whose_rules_fired(project, fired, admin_user):
    answer = client_for(admin_user).delete("/api/v1/projects/pretrain/")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"project": "pretrain", "archived": False, "runs_deleted": 2, "runs_archived": 0}
    assert not Project.objects.filter(slug="pretrain").exists()
    assert not Run.objects.exists() and not Rule.objects.exists() and not Alert.objects.exists()


@pytest.mark.parametrize("who, status", [("owner", 403), ("teammate", 403), ("outsider", 404)])
def test_nobody_else_deletes_a_project(request, who, status, project, fired):
    answer = client_for(request.getfixturevalue(who)).delete("/api/v1/projects/pretrain/")
    assert answer.status_code == status, answer.content
    assert Project.objects.filter(slug="pretrain").exists() and Alert.objects.count() == 2


def test_a_project_with_a_decision_log_is_archived(project, sender, fired, admin_user, token):
    logged = Run.objects.get(run_id="run-a")
    log_entry(logged)

    answer = client_for(admin_user).delete("/api/v1/projects/pretrain/")

    assert answer.json() == {"project": "pretrain", "archived": True, "runs_deleted": 1, "runs_archived": 1}
    assert ProjectArchive.objects.filter(project=project).exists()
    assert list(Run.objects.values_list("run_id", flat=True)) == ["run-a"] and stored_points(logged) == 0
    assert Alert.objects.filter(run=logged).count() == 1
    assert not ProjectToken.objects.filter(project=project, revoked_at__isnull=True).exists()
    assert sender.post({"run": {"id": "run-c"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]}).status_code == 401
