"""Each project's Alertmanager catch-all run (`<slug>/unassigned`) is reserved for that project, on every path.

Before: another project's token could create `<slug>/unassigned` (through the
ingest API, or a `run` label) before the project had received any Alertmanager
alert; from then on the project's own catch-all alerts were answered 403.
"""
import pytest

from ingest.models import Project, ProjectToken, Run
from tests.alertmanager_support import Webhook, am_alert, notification

pytestmark = pytest.mark.django_db

NODE_DOWN = {"alertname": "NodeDown", "instance": "node7:9100"}


def test_another_projects_token_cannot_take_the_catch_all_through_ingest(webhook, sender, other_token):
    response = sender.post({"run": {"id": "pretrain/unassigned"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]},
                           token=other_token)
    assert response.status_code == 403
    assert response.json()["errors"][0]["path"] == "run.id"
    assert not Run.objects.filter(run_id="pretrain/unassigned").exists()

    response = webhook.post(notification(am_alert(**NODE_DOWN)))  # the project's own catch-all still works
    assert response.status_code == 202, response.content
    assert [e["component"] for e in webhook.events("pretrain/unassigned")] == ["node7:9100"]


def test_another_projects_run_label_cannot_take_the_catch_all(webhook, other_project, other_token):
    response = webhook.post(notification(am_alert(run="pretrain/unassigned", **NODE_DOWN)), token=other_token)
    assert response.status_code == 202, response.content
    [note] = response.json()["put_aside"]
    assert note["path"] == "alerts[0].labels.run" and note["stored_on"] == "vision/unassigned"
    assert list(Run.objects.values_list("run_id", "project__slug")) == [("vision/unassigned", "vision")]

    assert webhook.post(notification(am_alert(**NODE_DOWN))).status_code == 202
    assert Run.objects.get(run_id="pretrain/unassigned").project.slug == "pretrain"


def test_the_catch_all_of_a_project_created_later_is_reserved_too(sender, other_token, django_capture_on_commit_callbacks):
    response = sender.post({"run": {"id": "future/unassigned"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]},
                           token=other_token)
    assert response.status_code == 403
    future = Project.objects.create(slug="future")
    webhook = Webhook(ProjectToken.issue(future)[1], django_capture_on_commit_callbacks)
    assert webhook.post(notification(am_alert(**NODE_DOWN))).status_code == 202
    assert len(webhook.events("future/unassigned")) == 1


def test_a_project_may_send_its_own_catch_all_telemetry(sender):
    response = sender.post({"run": {"id": "pretrain/unassigned"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]})
    assert response.status_code == 202, response.content
