"""Acknowledging, muting or giving a verdict to an incident acts on each of its alerts: each alert gets its own
AlertChange row (who, when), the incident one row for the action, and its state follows its alerts."""
import pytest
from django.core.exceptions import ValidationError

from alerts.incident_actions import acknowledge_incident, give_incident_verdict, mute_incident
from alerts.models import Alert, AlertChange, IncidentChange, Mute
from tests.incident_support import COMPONENTS, healthy, incidents, nan_in_one_weight, send, starter_project

pytestmark = pytest.mark.django_db
ALERTS = len(COMPONENTS) + 1  # each component's non-finite health and the loss


@pytest.fixture
def incident(sender, project):
    starter_project(project)
    send(sender, "one-nan", healthy(range(0, 30)) + nan_in_one_weight(30))
    [incident] = incidents("one-nan")
    assert incident.alerts.count() == ALERTS
    return incident


def people_rows(kind):
    return AlertChange.objects.filter(kind=kind, by__isnull=False)


def test_acknowledging_writes_one_row_per_alert(incident, oncall):
    rows = acknowledge_incident(incident, oncall)
    assert len(rows) == ALERTS == people_rows("acknowledged").count()
    assert {r.alert_id for r in rows} == set(incident.alerts.values_list("pk", flat=True))
    assert all(r.by == oncall for r in rows)
    assert set(Alert.objects.values_list("state", flat=True)) == {"acknowledged"}
    incident.refresh_from_db()
    assert incident.state == "acknowledged"
    assert list(incident.changes.values_list("kind", "by__username", "state")) == [
        ("opened", None, "firing"), ("acknowledged", "omar", ""), ("state", "omar", "acknowledged")]

    # Again: nothing left to acknowledge, nothing written.
    assert acknowledge_incident(incident, oncall) == []
    assert people_rows("acknowledged").count() == ALERTS and incident.changes.count() == 3


def test_a_verdict_is_given_to_each_alert(incident, owner):
    with pytest.raises(ValidationError) as error:
        give_incident_verdict(incident, owner, "false_alarm")
    assert "note" in error.value.message_dict
    assert not people_rows("verdict").exists() and not IncidentChange.objects.filter(kind="verdict").exists()

    rows = give_incident_verdict(incident, owner, "actionable", note="NaN in layers.4 weights")
    assert len(rows) == ALERTS == people_rows("verdict").count()
    assert set(Alert.objects.values_list("verdict", flat=True)) == {"actionable"}
    change = incident.changes.get(kind="verdict")
    assert (change.verdict, change.note, change.by) == ("actionable", "NaN in layers.4 weights", owner)


@pytest.mark.parametrize("scope, mutes", [("component", ALERTS), ("run", 2)])
def test_muting_mutes_each_alert_with_one_mute_per_rule_or_component(incident, oncall, scope, mutes):
    made = mute_incident(incident, oncall, scope, "known bad node, job being moved", duration_minutes=60)
    assert len(made) == mutes == Mute.objects.count()
    assert len({m.expires_at for m in made}) == 1
    assert people_rows("muted").count() == ALERTS  # one row per alert, whichever mute covered it
    incident.refresh_from_db()
    assert incident.state == "muted"


def test_a_resolved_incident_cannot_be_muted_or_acknowledged(incident, owner):
    from alerts import triage

    for alert in Alert.objects.select_related("rule", "run"):
        triage.resolve(alert, owner, note="rolled back")
    incident.refresh_from_db()
    assert incident.state == "resolved"
    for act in (lambda: acknowledge_incident(incident, owner),
                lambda: mute_incident(incident, owner, "run", "why", duration_minutes=60)):
        with pytest.raises(ValidationError) as error:
            act()
        assert "state" in error.value.message_dict
    assert not Mute.objects.exists()
