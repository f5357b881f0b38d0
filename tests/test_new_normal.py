"""A person declares a new normal: an open band alert is resolved with a `new_normal` row (who, why), its band
starts again from the next points, and the level it held no longer pages. Nobody else can; a band never does
it by itself."""
import pytest
from rest_framework.test import APIClient

from alerts.models import Alert, AlertChange
from tests.engine_support import Job, alerts, starter

pytestmark = pytest.mark.django_db
WARMUP = [{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}]


@pytest.fixture
def slowed(sender, project):
    """A run whose steps take twice as long from step 400 on, for good: slow-steps fires and stays open."""
    starter(project)
    job = Job()
    job.override("step_time", lambda s, v: v * 2 if s >= 400 else v)
    job.send(sender, "slowed", 0, 700, phases=WARMUP)
    [alert] = alerts("slowed", "slow-steps")
    assert alert.state == "firing"
    return job, alert


def new_normal(user, alert, **body):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client.post(f"/api/v1/alerts/{alert.pk}/new-normal/", body, format="json")


def test_a_rule_admin_declares_the_new_level_normal_and_it_pages_no_more(slowed, sender, owner):
    job, alert = slowed
    response = new_normal(owner, alert, note="moved to the shared file system on purpose")
    assert response.status_code == 200, response.content
    alert.refresh_from_db()
    assert alert.state == "resolved"
    row = AlertChange.objects.get(alert=alert, kind="new_normal")
    assert (row.by, row.note, row.step) == (owner, "moved to the shared file system on purpose", 699)
    job.send(sender, "slowed", 700, 1200)
    assert [a.state for a in alerts("slowed", "slow-steps")] == ["resolved"]  # the doubled steps are the baseline now


def test_resolving_by_hand_is_not_a_new_normal_the_lasting_fault_fires_again(slowed, sender, owner):
    job, alert = slowed
    client = APIClient()
    client.force_authenticate(owner)
    assert client.post(f"/api/v1/alerts/{alert.pk}/resolve/", {}, format="json").status_code == 200
    job.send(sender, "slowed", 700, 900)
    assert [a.state for a in alerts("slowed", "slow-steps")] == ["resolved", "firing"]


def test_a_note_is_required_and_viewers_outsiders_and_tokens_cannot(slowed, owner, teammate, outsider, sender):
    _, alert = slowed
    assert new_normal(owner, alert).status_code == 400
    assert new_normal(teammate, alert, note="x").status_code == 403
    assert new_normal(outsider, alert, note="x").status_code == 404
    assert new_normal(None, alert, note="x").status_code in (401, 403)
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Bearer {sender.token}")
    assert token.post(f"/api/v1/alerts/{alert.pk}/new-normal/", {"note": "x"}, format="json").status_code == 403
    assert Alert.objects.get(pk=alert.pk).state == "firing"


def test_only_a_rule_that_learns_a_level_has_one_to_accept(sender, project, owner):
    starter(project)
    job = Job()
    job.override("weight_norm", lambda s, v: float("nan") if s >= 400 else v, component="head")
    job.send(sender, "nan", 0, 450, phases=WARMUP)
    [alert] = alerts("nan", "nonfinite-weights")
    response = new_normal(owner, alert, note="x")
    assert response.status_code == 400 and "rule" in response.content.decode()
