"""The ingest response's `actions`: automatic directives for the job, only when the project has opted in."""
import pytest

from alerts.models import Alert, AlertChange, Rule
from alerts.rules import save_rule
from ingest.models import Project

pytestmark = pytest.mark.django_db
OWNER = "Pretrain on-call <#pretrain-oncall>"


def make_rule(project, name="loss-nonfinite", response="stop"):
    return save_rule(
        Rule(project=project, name=name, kind="nonfinite", owner=OWNER, scope={"metrics": ["loss"], "component": ""},
             persistence={"points": 1, "resolve_points": 10}, diagnostic_url=f"https://runbooks.example/{name}",
             permitted_response=response),
        source="test",
    )


def loss(steps, nan_at=()):
    return [{"step": s, "metric": "loss", "value": "NaN" if s in nan_at else 2.0} for s in steps]


def post(sender, run_id, points):
    response = sender.post({"run": {"id": run_id}, "points": points})
    assert response.status_code == 202, response.content
    return response.json()["actions"]


def opt_in(project):
    Project.objects.filter(pk=project.pk).update(read_only=False)


def test_a_read_only_project_is_never_told_to_act(sender, project):
    assert Project.objects.get(pk=project.pk).read_only  # the default
    make_rule(project)
    assert post(sender, "ro", loss(range(0, 5), nan_at={4})) == []
    [alert] = Alert.objects.all()
    assert alert.state == "firing"  # the alert is there; only the directive is withheld
    assert post(sender, "ro", loss(range(5, 8), nan_at={5, 6, 7})) == []


@pytest.mark.django_db(transaction=True)
def test_a_stop_rule_tells_the_job_to_stop_while_its_alert_is_open(sender, project):
    # Committed for real, as in production: eager evaluation runs before the response is written.
    opt_in(project)
    make_rule(project)
    assert post(sender, "stop-me", loss(range(0, 5))) == []

    actions = post(sender, "stop-me", loss(range(5, 10), nan_at={9}))
    [alert] = Alert.objects.all()
    stop = {"action": "stop", "alert": alert.pk, "rule": "loss-nonfinite"}
    assert actions == [stop]  # the batch that fired it already carries the directive

    assert post(sender, "stop-me", loss(range(10, 15))) == [stop]  # still open: 5 clear points of 10
    assert post(sender, "stop-me", loss(range(15, 20))) == []  # 10 clear points: resolved
    assert Alert.objects.get().state == "resolved"


def test_later_batches_repeat_the_directive_while_the_alert_is_open(sender, project):
    opt_in(project)
    make_rule(project)
    post(sender, "repeat", loss(range(0, 5), nan_at={4}))
    [alert] = Alert.objects.all()
    stop = {"action": "stop", "alert": alert.pk, "rule": "loss-nonfinite"}
    assert post(sender, "repeat", loss(range(5, 8))) == [stop]
    assert post(sender, "repeat", loss(range(8, 11))) == [stop]
    post(sender, "repeat", loss(range(11, 20)))  # the 10th clear point resolves it
    assert Alert.objects.get().state == "resolved"
    assert post(sender, "repeat", loss(range(20, 22))) == []


def test_a_muted_alert_gives_no_directive(sender, project):
    opt_in(project)
    make_rule(project)
    post(sender, "muted", loss(range(0, 5), nan_at={4}))
    alert = Alert.objects.get()
    Alert.objects.filter(pk=alert.pk).update(state="muted")
    AlertChange.objects.create(alert=alert, kind="muted", step=4, at=alert.fired_at)
    assert post(sender, "muted", loss(range(5, 8))) == []


def test_a_notify_rule_gives_no_directive(sender, project):
    opt_in(project)
    make_rule(project, name="loss-nonfinite-notify", response="notify")
    post(sender, "notified", loss(range(0, 5), nan_at={4}))
    assert Alert.objects.get().state == "firing"
    assert post(sender, "notified", loss(range(5, 8), nan_at={5})) == []


def test_a_stop_for_one_run_is_not_sent_to_another(sender, project):
    opt_in(project)
    make_rule(project)
    post(sender, "broken", loss(range(0, 5), nan_at={4}))
    assert len(post(sender, "broken", loss(range(5, 6)))) == 1
    assert post(sender, "fine", loss(range(0, 5))) == []
