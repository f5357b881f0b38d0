"""The inbox page lists one row per incident (its origin, blast radius and severity), its alerts below it until
collapsed by the browser, with plain-form actions on the whole incident; sticky hard invariants stay in the
default view and alerts that ended by themselves without a verdict are listed apart."""
import re

import pytest

from alerts.models import AlertChange, IncidentChange
from tests.factories import make_alert, make_rule
from tests.incident_support import COMPONENTS, healthy, incidents, nan_in_one_weight, send, starter_project

pytestmark = pytest.mark.django_db
ALERTS = len(COMPONENTS) + 1


@pytest.fixture
def incident(sender, project):
    starter_project(project)
    send(sender, "one-nan", healthy(range(0, 30)) + nan_in_one_weight(30))
    [incident] = incidents("one-nan")
    return incident


def page(client, **params):
    response = client.get("/inbox/", params)
    assert response.status_code == 200
    return response.content.decode()


def test_one_row_per_incident_naming_its_origin_with_its_alerts_beneath(client, owner, incident):
    client.force_login(owner)
    html = page(client)
    assert len(re.findall(r'<tr id="incident-\d+"', html)) == 1
    row = re.search(rf'<tr id="incident-{incident.pk}".*?</tr>', html, re.S).group(0)
    assert "weight_norm of layers.4 at step 30" in row and "nonfinite-weights" in row
    assert f"{ALERTS} alerts" in row and "act_norm of layers.0" in row and "Notify" in row
    members = re.findall(rf'<tr id="alert-(\d+)" class="inbox-row[^"]*incident-member[^"]*"[^>]*data-incident="{incident.pk}" hidden>', html)
    assert sorted(map(int, members)) == sorted(incident.alerts.values_list("pk", flat=True))


def test_acknowledging_the_incident_from_the_page_writes_a_row_per_alert(client, oncall, incident):
    client.force_login(oncall)
    response = client.post(f"/inbox/incidents/{incident.pk}/acknowledge/", follow=True)
    assert f"Acknowledged incident #{incident.pk} on one-nan: {ALERTS} alerts." in response.content.decode()
    assert AlertChange.objects.filter(kind="acknowledged", by=oncall).count() == ALERTS
    assert IncidentChange.objects.filter(kind="acknowledged", by=oncall).count() == 1


def test_a_false_alarm_without_a_note_shows_the_error_beside_the_incidents_field(client, oncall, incident):
    client.force_login(oncall)
    response = client.post(f"/inbox/incidents/{incident.pk}/verdict/", {"verdict": "false_alarm"})
    assert response.status_code == 400
    html = response.content.decode()
    assert f'id="incident-verdict-{incident.pk}-note-error"' in html and "a note is required" in html
    assert not AlertChange.objects.filter(by=oncall).exists()


@pytest.mark.parametrize("action", ["acknowledge", "verdict", "mute"])
def test_viewers_get_403_outsiders_404_and_anonymous_the_login(client, teammate, outsider, incident, action):
    url = f"/inbox/incidents/{incident.pk}/{action}/"
    post = {"verdict": "actionable", "scope": "run", "reason": "x", "duration_minutes": "60"}
    assert client.post(url, post)["Location"].startswith("/accounts/login/")
    client.force_login(teammate)
    assert client.post(url, post).status_code == 403
    assert "incident-acknowledge" not in page(client) and "read only" in page(client)
    client.force_login(outsider)
    assert client.post(url, post).status_code == 404
    assert f'id="incident-{incident.pk}"' not in page(client)
    assert not AlertChange.objects.filter(by__isnull=False).exists()


def test_sticky_alerts_stay_in_the_default_view_and_quiet_ones_are_listed_apart(client, owner, project):
    nan = make_rule(project, kind="nonfinite", name="nonfinite-loss", scope={"metrics": ["loss"]})
    band = make_rule(project, kind="band")
    sticky = make_alert(nan, "run-a", "", state="resolved")
    quiet = make_alert(band, "run-a", "", state="resolved")
    client.force_login(owner)
    html = page(client)
    assert re.findall(r'<tr id="alert-(\d+)"', html) == [str(sticky.pk)]
    row = re.search(rf'<tr id="alert-{sticky.pk}".*?</tr>', html, re.S).group(0)
    assert "needs review" in row and f'id="acknowledge-{sticky.pk}"' in row
    section = re.search(r'<section class="resolved-no-verdict".*?</section>', html, re.S).group(0)
    assert re.findall(r'data-alert-id="(\d+)"', section) == [str(quiet.pk)]
    assert "1 alert ended by itself and nobody said whether it was real" in section

    client.post(f"/inbox/alerts/{sticky.pk}/acknowledge/")
    html = page(client)
    assert re.findall(r'<tr id="alert-(\d+)"', html) == []
