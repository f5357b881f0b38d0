"""The admin's delete confirmation for a run or a project counts what goes instead of listing every row
(a 1 M-point run's page was 781 KB), and its delete goes in chunks: a project whose rules fired is deleted."""
import pytest

from ingest.models import Block, Project, Run
from tests.factories import client_for
from tests.retention_support import fired_alert, send_points

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(django_user_model):
    return client_for(django_user_model.objects.create_superuser("ada", password="pw-ada"))


def test_the_run_delete_page_counts_rows_and_deletes(sender, admin_client):
    run = send_points(sender, "doomed-run")
    send_points(sender, "doomed-run", first_step=300)
    fired_alert(run)
    assert Block.objects.filter(series__run=run).count() >= 2
    page = admin_client.get(f"/admin/ingest/run/{run.pk}/delete/").content.decode()
    assert "1 run(s) with 600 points and 1 alerts" in page
    assert "Block" not in page and "Series:" not in page
    admin_client.post(f"/admin/ingest/run/{run.pk}/delete/", {"post": "yes"})
    assert not Run.objects.filter(pk=run.pk).exists()


def test_the_project_delete_page_deletes_a_project_whose_rules_fired(project, sender, admin_client):
    fired_alert(send_points(sender, "run-a"))
    page = admin_client.get(f"/admin/ingest/project/{project.pk}/delete/").content.decode()
    assert "1 run(s) with 300 points and 1 alerts" in page and "protected" not in page.lower()
    admin_client.post(f"/admin/ingest/project/{project.pk}/delete/", {"post": "yes"})
    assert not Project.objects.filter(pk=project.pk).exists()


def test_only_a_superuser_sees_a_project_delete(project, django_user_model):
    staff = django_user_model.objects.create_user("stan", password="pw-stan", is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(*Permission.objects.filter(codename__in=["delete_project", "view_project", "change_project"]))
    assert client_for(staff).get(f"/admin/ingest/project/{project.pk}/delete/").status_code == 403
