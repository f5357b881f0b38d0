"""Acknowledge, resolve and verdict: who may act, what each state allows, and one AlertChange row per action."""
import threading
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from alerts import triage
from alerts.models import Alert, AlertChange
from tests.factories import make_alert, make_rule
from tests.triage_support import triage_rows

pytestmark = pytest.mark.django_db
ACTIONS = {
    "acknowledge": {},
    "resolve": {},
    "verdict": {"verdict": "actionable", "note": ""},
    "mute": {"scope": "run", "reason": "known flaky node", "duration_minutes": 60},
}
ROW_KIND = {"acknowledge": "acknowledged", "resolve": "resolved", "verdict": "verdict", "mute": "muted"}


def paths(alert):
    return {name: f"/api/v1/alerts/{alert.pk}/{name}/" for name in ACTIONS}


def personal_token(user):
    out = StringIO()
    call_command("api_token", user.username, stdout=out)
    return out.getvalue().strip()


# --- who may act ----------------------------------------------------------------

@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("who", ["owner", "oncall"])
def test_rule_admins_and_on_call_act(api, request, alert, action, who):
    user = request.getfixturevalue(who)
    api.force_login(user)
    response = api.post(paths(alert)[action], ACTIONS[action], format="json")
    assert response.status_code in (200, 201), response.content
    [row] = triage_rows(alert)
    assert (row.kind, row.by) == (ROW_KIND[action], user) and row.at is not None


@pytest.mark.parametrize("action", ACTIONS)
def test_a_viewer_may_not_act(api, teammate, alert, action):
    api.force_login(teammate)
    response = api.post(paths(alert)[action], ACTIONS[action], format="json")
    assert response.status_code == 403
    assert "on-call" in response.json()["errors"][0]["message"]
    assert not triage_rows().exists() and Alert.objects.get().state == "firing"


@pytest.mark.parametrize("action", ACTIONS)
def test_an_outsider_gets_not_found(api, outsider, alert, action):
    api.force_login(outsider)  # on-call, but of another project
    assert api.post(paths(alert)[action], ACTIONS[action], format="json").status_code == 404
    assert api.get(f"/api/v1/alerts/{alert.pk}/").status_code == 404
    assert not triage_rows().exists()


@pytest.mark.parametrize("action", ACTIONS)
def test_anonymous_is_refused(api, alert, action):
    response = api.post(paths(alert)[action], ACTIONS[action], format="json")
    assert response.status_code == 401
    assert response.json()["errors"][0]["path"] == "Authorization"


@pytest.mark.parametrize("action", ACTIONS)
def test_a_project_ingest_token_may_read_but_not_act(api, token, other_token, alert, action):
    assert api.get(f"/api/v1/alerts/{alert.pk}/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    assert api.post(paths(alert)[action], ACTIONS[action], format="json", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403
    assert api.post(paths(alert)[action], ACTIONS[action], format="json", HTTP_AUTHORIZATION=f"Bearer {other_token}").status_code == 404
    assert not triage_rows().exists()


def test_a_personal_token_acts_with_its_users_role(api, owner, teammate, alert):
    ok = api.post(paths(alert)["acknowledge"], HTTP_AUTHORIZATION=f"Bearer {personal_token(owner)}")
    assert ok.status_code == 200 and ok.json()["change"]["by"] == "olivia"
    refused = api.post(paths(alert)["resolve"], HTTP_AUTHORIZATION=f"Bearer {personal_token(teammate)}")
    assert refused.status_code == 403


def test_session_posts_need_the_csrf_token(owner, alert):
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(owner)
    assert browser.post(paths(alert)["acknowledge"]).status_code == 403
    assert not triage_rows().exists()
    page = browser.get("/inbox/")  # any console page sets the cookie
    response = browser.post(paths(alert)["acknowledge"], HTTP_X_CSRFTOKEN=page.cookies["csrftoken"].value)
    assert response.status_code == 200


# --- reading an alert -------------------------------------------------------------

@pytest.mark.parametrize("who", ["owner", "teammate"])
def test_members_read_an_alert_with_its_history(api, request, owner, alert, who):
    api.force_login(owner)
    api.post(paths(alert)["acknowledge"])
    api.post(paths(alert)["verdict"], {"verdict": "false_alarm", "note": "a logging bug, not the model"}, format="json")
    api.force_login(request.getfixturevalue(who))
    body = api.get(f"/api/v1/alerts/{alert.pk}/").json()
    assert (body["id"], body["project"], body["state"], body["verdict"]) == (alert.pk, "pretrain", "acknowledged", "false_alarm")
    assert body["rule"]["name"] == "grad-nonfinite" and body["component"] == "layers.3"
    assert [(c["kind"], c["by"], c["note"], c["verdict"]) for c in body["changes"]] == [
        ("fired", None, "", None),
        ("acknowledged", "olivia", "", None),
        ("verdict", "olivia", "a logging bug, not the model", "false_alarm"),
    ]
    assert all(c["at"] for c in body["changes"])


def test_reading_an_alert_that_does_not_exist_is_a_404(api, owner):
    api.force_login(owner)
    assert api.get("/api/v1/alerts/99999/").status_code == 404


def test_the_contract_list_keeps_its_fields(api, owner, alert):
    api.force_login(owner)
    [item] = api.get("/api/v1/alerts/", {"run": "run-a"}).json()["results"]
    assert set(item) >= {"id", "run", "rule", "component", "metric", "condition", "step", "last_step", "fired_step",
                         "magnitude", "magnitude_unit", "phase", "state", "verdict", "fired_at", "resolved_at"}


# --- acknowledge ----------------------------------------------------------------

def test_acknowledging_twice_writes_one_row(api, owner, alert):
    api.force_login(owner)
    first = api.post(paths(alert)["acknowledge"]).json()
    second = api.post(paths(alert)["acknowledge"])
    assert second.status_code == 200
    assert first["change"]["kind"] == "acknowledged" and second.json()["change"] is None
    assert list(triage_rows().values_list("kind", flat=True)) == ["acknowledged"]


def test_concurrent_acknowledges_from_stale_copies_write_one_row(owner, oncall, alert):
    # Both loaded the alert while it was firing; the conditional update lets only one change it.
    mine, theirs = Alert.objects.get(pk=alert.pk), Alert.objects.get(pk=alert.pk)
    assert triage.acknowledge(mine, owner) is not None
    assert triage.acknowledge(theirs, oncall) is None
    assert triage_rows().count() == 1 and Alert.objects.get().state == "acknowledged"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_eight_people_acknowledging_at_once_write_one_row(project, owner):
    alert = make_alert(make_rule(project, kind="nonfinite"))
    start, results, lock = threading.Barrier(8), [], threading.Lock()

    def press():
        try:
            stale = Alert.objects.select_related("rule", "run").get(pk=alert.pk)
            start.wait()
            change = triage.acknowledge(stale, owner)
            with lock:
                results.append(change is not None)
        finally:
            connection.close()

    threads = [threading.Thread(target=press) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]
    assert AlertChange.objects.filter(kind="acknowledged").count() == 1


def test_a_muted_alert_can_be_acknowledged(api, owner, alert):
    api.force_login(owner)
    api.post(paths(alert)["mute"], ACTIONS["mute"], format="json")
    assert api.post(paths(alert)["acknowledge"]).json()["alert"]["state"] == "acknowledged"


def test_a_resolved_alert_cannot_be_acknowledged(api, owner, rule):
    # Reviewed already: a hard invariant nobody looked at may still be (tests/test_sticky_hard_invariants.py).
    resolved = make_alert(rule, state="resolved", reviewed=True)
    api.force_login(owner)
    response = api.post(paths(resolved)["acknowledge"])
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["path"] == "state" and "resolved" in error["message"]
    assert not triage_rows().exists()


# --- resolve --------------------------------------------------------------------

def test_resolving_records_who_when_and_the_note(api, oncall, alert):
    api.force_login(oncall)
    body = api.post(paths(alert)["resolve"], {"note": "restarted from step 9000"}, format="json").json()
    assert (body["alert"]["state"], body["change"]["note"], body["change"]["by"]) == ("resolved", "restarted from step 9000", "omar")
    assert body["alert"]["resolved_at"] is not None
    again = api.post(paths(alert)["resolve"]).json()
    assert again["change"] is None and triage_rows().count() == 1


# --- verdict --------------------------------------------------------------------

def test_a_false_alarm_without_a_note_is_a_400_naming_note(api, owner, alert):
    api.force_login(owner)
    for note in ("", "   "):
        response = api.post(paths(alert)["verdict"], {"verdict": "false_alarm", "note": note}, format="json")
        assert response.status_code == 400
        assert [e["path"] for e in response.json()["errors"]] == ["note"]
    assert not triage_rows().exists() and Alert.objects.get().verdict is None


@pytest.mark.parametrize("body", [{}, {"verdict": "maybe"}, {"verdict": None}])
def test_a_missing_or_unknown_verdict_is_a_400_naming_verdict(api, owner, alert, body):
    api.force_login(owner)
    response = api.post(paths(alert)["verdict"], body, format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == ["verdict"]


def test_a_body_that_is_not_an_object_is_a_400(api, owner, alert):
    api.force_login(owner)
    assert api.post(paths(alert)["verdict"], ["actionable"], format="json").status_code == 400


def test_a_later_verdict_replaces_the_alerts_but_both_rows_stay(api, owner, oncall, alert):
    api.force_login(oncall)
    api.post(paths(alert)["verdict"], {"verdict": "actionable"}, format="json")
    api.force_login(owner)
    api.post(paths(alert)["verdict"], {"verdict": "false_alarm", "note": "the loss scaler, expected"}, format="json")
    assert Alert.objects.get().verdict == "false_alarm"
    assert list(triage_rows().values_list("kind", "verdict", "by__username", "note")) == [
        ("verdict", "actionable", "omar", ""),
        ("verdict", "false_alarm", "olivia", "the loss scaler, expected"),
    ]


def test_a_verdict_may_be_given_on_a_resolved_alert(api, owner, rule):
    resolved = make_alert(rule, state="resolved")
    api.force_login(owner)
    response = api.post(paths(resolved)["verdict"], {"verdict": "actionable", "note": "real divergence"}, format="json")
    assert response.status_code == 200
    assert response.json()["alert"]["verdict"] == "actionable" == Alert.objects.get().verdict


def test_the_domain_functions_name_the_field(owner, alert):
    with pytest.raises(ValidationError) as caught:
        triage.give_verdict(alert, owner, "false_alarm", "")
    assert set(caught.value.message_dict) == {"note"}


def test_each_action_is_announced_live_with_who_did_it(api, owner, alert, monkeypatch):
    import alerts.changes

    heard = []
    monkeypatch.setattr(alerts.changes, "publish", lambda run, kind, frame: heard.append((run.run_id, kind, frame())))
    api.force_login(owner)
    api.post(paths(alert)["acknowledge"])
    api.post(paths(alert)["verdict"], {"verdict": "actionable"}, format="json")
    assert [(run, kind, f["change"], f["by"], f["alert"]["state"]) for run, kind, f in heard] == [
        ("run-a", "alert", "acknowledged", "olivia", "acknowledged"),
        ("run-a", "alert", "verdict", "olivia", "acknowledged"),
    ]
    assert heard[1][2]["verdict"] == "actionable"


@pytest.mark.parametrize("action, body, field", [
    ("verdict", {"verdict": "actionable", "note": 5}, "note"),
    ("resolve", {"note": ["done"]}, "note"),
    ("verdict", {"verdict": ["actionable"]}, "verdict"),
])
def test_text_fields_that_are_not_text_are_named(api, owner, alert, action, body, field):
    api.force_login(owner)
    response = api.post(paths(alert)[action], body, format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == [field]
