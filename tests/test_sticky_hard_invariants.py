"""A hard invariant that fired and cleared by itself is not over: a single NaN loss followed by finite points
stays in the inbox's default view, and its run needs review, until a person acknowledges it or gives a verdict.
An alert of any other kind that resolved by itself without a verdict is counted under "resolved, no verdict"."""
import pytest
from django.core.exceptions import ValidationError

from alerts import review, triage
from alerts.models import Alert, AlertChange
from ingest.models import Run
from alerts.incident_actions import acknowledge_incident
from tests.incident_support import healthy, incidents, send, starter_project
from tests.factories import make_alert, make_rule

pytestmark = pytest.mark.django_db


def inbox(api, state=None):
    response = api.get("/api/v1/inbox/", {"state": state} if state else {})
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["results"]]


@pytest.fixture
def recovered(sender, project):
    """One NaN loss at step 31, then finite points: it fires and resolves inside the same batch."""
    starter_project(project)
    points = healthy(range(0, 60), health=False)
    points[31]["value"] = "NaN"
    send(sender, "blip", points)
    [alert] = Alert.objects.select_related("rule", "run")
    assert (alert.rule.name, alert.first_step, alert.state) == ("nonfinite-loss", 31, "resolved")
    return alert


def test_a_nan_loss_that_recovers_stays_in_the_default_inbox_until_acknowledged(api, owner, recovered):
    api.force_login(owner)
    assert inbox(api) == [recovered.pk]
    assert inbox(api, "needs_review") == [recovered.pk]
    assert Run.objects.get(run_id="blip").status == "healthy"  # its condition cleared ...
    assert review.runs_needing_review(Run.objects.all()) == {recovered.run_id}  # ... but someone must look
    [incident] = incidents("blip")
    assert incident.state == "needs_review"

    response = api.post(f"/api/v1/alerts/{recovered.pk}/acknowledge/")
    assert response.status_code == 200, response.content
    assert response.json()["alert"]["state"] == "resolved"  # it stays resolved; a person has now looked
    assert inbox(api) == [] and inbox(api, "needs_review") == []
    assert review.runs_needing_review(Run.objects.all()) == set()
    incident.refresh_from_db()
    assert incident.state == "resolved"
    assert list(AlertChange.objects.filter(alert=recovered).values_list("kind", "by__username")) == [
        ("fired", None), ("resolved", None), ("acknowledged", "olivia")]
    # Looked at once is enough: acknowledging it again is refused like any resolved alert.
    with pytest.raises(ValidationError):
        triage.acknowledge(Alert.objects.get(), owner)


def test_a_verdict_also_takes_it_out_and_counts_it(api, owner, recovered):
    api.force_login(owner)
    response = api.post(f"/api/v1/alerts/{recovered.pk}/verdict/", {"verdict": "actionable"}, format="json")
    assert response.status_code == 200, response.content
    assert inbox(api) == [] and review.runs_needing_review(Run.objects.all()) == set()
    assert inbox(api, "resolved_no_verdict") == []


def test_acknowledging_its_incident_takes_it_out(owner, recovered):
    [incident] = incidents("blip")
    rows = acknowledge_incident(incident, owner)
    assert [(r.alert_id, r.kind) for r in rows] == [(recovered.pk, "acknowledged")]
    incident.refresh_from_db()
    assert incident.state == "resolved" and review.runs_needing_review(Run.objects.all()) == set()


def test_other_alerts_that_resolved_by_themselves_are_listed_as_resolved_without_verdict(api, owner, project):
    band = make_rule(project, name="loss-band", kind="band", scope={"metrics": ["loss"]})
    by_itself = make_alert(band, "run-a", "", state="resolved")
    judged = make_alert(band, "run-a", "layers.1", state="resolved")
    triage.give_verdict(judged, owner, "false_alarm", note="warmup noise")
    by_hand = make_alert(band, "run-a", "layers.2")
    triage.resolve(by_hand, owner, note="restarted")
    api.force_login(owner)
    assert inbox(api) == []  # not hard invariants: resolved means out of the default view
    assert inbox(api, "resolved_no_verdict") == [by_itself.pk]
    # Out of the inbox's list, but its run is not plainly healthy while nobody has judged it (issue 22).
    assert review.runs_needing_review(Run.objects.all()) == {by_itself.run_id}
    triage.give_verdict(by_itself, owner, "actionable")
    assert review.runs_needing_review(Run.objects.all()) == set()


def test_a_hard_invariant_resolved_by_hand_has_been_looked_at(owner, project):
    rule = make_rule(project, kind="nonfinite")  # non-finite gradients
    alert = make_alert(rule)
    triage.resolve(alert, owner, note="bad node, job moved")
    assert review.runs_needing_review(Run.objects.all()) == set()
    assert list(review.resolved_no_verdict(Alert.objects.all())) == []
