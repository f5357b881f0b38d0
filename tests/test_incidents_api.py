"""GET /api/v1/incidents/?run= and acting on an incident over the API: members read, on-call and rule admins
act (one change row per alert), viewers and project tokens may not act, outsiders get 404."""
import pytest

from alerts.models import Alert, AlertChange, IncidentChange
from tests.incident_support import COMPONENTS, healthy, nan_in_one_weight, send, starter_project

pytestmark = pytest.mark.django_db
RUN = "one-nan"
ALERTS = len(COMPONENTS) + 1
ACTIONS = {
    "acknowledge": {},
    "verdict": {"verdict": "actionable", "note": "NaN in one weight"},
    "mute": {"scope": "run", "reason": "rolling back to step 0", "duration_minutes": 60},
}


@pytest.fixture
def faulty(sender, project):
    """One NaN in one weight of layers.4 at step 30; the loss stays NaN after it (the same incident, extended)."""
    starter_project(project)
    send(sender, RUN, healthy(range(0, 30)) + nan_in_one_weight(30))
    send(sender, RUN, [{"step": s, "metric": "loss", "value": "NaN"} for s in range(31, 200)])
    return project


def listed(api, run=RUN, **headers):
    return api.get("/api/v1/incidents/", {"run": run}, **headers)


@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_members_read_a_runs_incidents_oldest_first(api, request, faulty, who):
    api.force_login(request.getfixturevalue(who))
    response = listed(api)
    assert response.status_code == 200, response.content
    [incident] = response.json()["results"]
    origin = Alert.objects.get(component="layers.4")
    assert incident == {
        "id": incident["id"], "run": RUN, "state": "firing", "severity": "notify", "first_step": 30,
        "origin": {"alert": origin.pk, "rule": "nonfinite-weights", "metric": "weight_norm", "component": "layers.4", "step": 30},
        "alerts": sorted(Alert.objects.values_list("pk", flat=True)),
        "blast_radius": incident["blast_radius"], "opened_at": incident["opened_at"], "resolved_at": None,
    }
    assert len(incident["blast_radius"]) == ALERTS - 1
    assert {"metric": "loss", "component": None} in incident["blast_radius"]
    assert {"metric": "weight_norm", "component": "layers.4"} not in incident["blast_radius"]


def test_the_alerts_api_is_unchanged(api, owner, faulty):
    api.force_login(owner)
    [alert] = api.get("/api/v1/alerts/", {"run": RUN}).json()["results"][:1]
    assert "incident" not in alert and "reviewed_at" not in alert


def test_an_outsider_or_another_projects_token_gets_not_found(api, outsider, other_token, faulty):
    api.force_login(outsider)
    assert listed(api).status_code == 404
    assert listed(api, run="no-such-run").status_code == 404
    api.logout()
    assert listed(api, HTTP_AUTHORIZATION=f"Bearer {other_token}").status_code == 404


def test_anonymous_is_refused_and_a_project_token_reads(api, token, faulty):
    response = listed(api)
    assert response.status_code == 401 and response.json()["errors"][0]["path"] == "Authorization"
    assert len(listed(api, HTTP_AUTHORIZATION=f"Bearer {token}").json()["results"]) == 1


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("who", ["owner", "oncall"])
def test_on_call_and_rule_admins_act_with_one_row_per_alert(api, request, faulty, action, who):
    user = request.getfixturevalue(who)
    api.force_login(user)
    [incident] = listed(api).json()["results"]
    response = api.post(f"/api/v1/incidents/{incident['id']}/{action}/", ACTIONS[action], format="json")
    assert response.status_code == (201 if action == "mute" else 200), response.content
    kind = {"acknowledge": "acknowledged", "verdict": "verdict", "mute": "muted"}[action]
    rows = AlertChange.objects.filter(kind=kind, by=user)
    assert rows.count() == ALERTS and {r.alert_id for r in rows} == set(incident["alerts"])
    assert IncidentChange.objects.filter(kind=kind, by=user).count() == 1
    body = response.json()
    assert body["incident"]["id"] == incident["id"]
    if action == "mute":
        assert sorted(body["muted"]) == incident["alerts"] and body["incident"]["state"] == "muted"
    else:
        assert len(body["changes"]) == ALERTS


@pytest.mark.parametrize("action", ACTIONS)
def test_viewers_and_project_tokens_may_not_act_outsiders_get_not_found(api, faulty, teammate, outsider, token, other_token, action):
    incident = faulty.runs.get().incidents.get()
    path = f"/api/v1/incidents/{incident.pk}/{action}/"
    api.force_login(teammate)
    response = api.post(path, ACTIONS[action], format="json")
    assert response.status_code == 403 and "on-call" in response.json()["errors"][0]["message"]
    api.force_login(outsider)
    assert api.post(path, ACTIONS[action], format="json").status_code == 404
    api.logout()
    assert api.post(path, ACTIONS[action], format="json", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403
    assert api.post(path, ACTIONS[action], format="json", HTTP_AUTHORIZATION=f"Bearer {other_token}").status_code == 404
    assert api.post(path, ACTIONS[action], format="json").status_code == 401
    assert not AlertChange.objects.filter(by__isnull=False).exists()


def test_bad_input_is_a_400_naming_the_field(api, owner, faulty):
    api.force_login(owner)
    [incident] = listed(api).json()["results"]
    response = api.post(f"/api/v1/incidents/{incident['id']}/verdict/", {"verdict": "false_alarm"}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == "note"
    response = api.post(f"/api/v1/incidents/{incident['id']}/mute/", {"scope": "run", "reason": "x"}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == "expires_at"
    assert not AlertChange.objects.filter(by__isnull=False).exists()
