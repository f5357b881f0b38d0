"""A decision on a run that names its incident (a review of one of its alerts, or the incident in the decision's
links) handles it: the interruptions page counts it as a human decision and the audit report no longer says the
rule was never triaged."""
import pytest

from alerts.models import Alert
from tests.factories import client_for, make_rule
from tests.review_support import open_review

pytestmark = pytest.mark.django_db


def send(sender, run_id, values):
    points = [{"step": step, "metric": "loss", "value": value} for step, value in values]
    assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202


@pytest.fixture
def spike(sender, project):
    make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0})
    send(sender, "spiked", [(s, 20.0 if s in (21, 22) else 2.0) for s in range(40)])
    [alert] = Alert.objects.select_related("rule", "run")
    assert alert.incident_id is not None
    return alert


def decide(client, review, **body):
    body = {"observation": "the loss spiked at step 21", "explanations": ["a bad batch"], **body}
    answer = client.post(f"/api/v1/reviews/{review.pk}/decision/", body, content_type="application/json")
    assert answer.status_code == 201, answer.content
    return answer


def handled(client, project):
    page = client.get(f"/projects/{project.slug}/interruptions/").content.decode()
    section = page.split('id="incident-handling"')[1].split("</section>")[0]
    report = client.get(f"/reports/rules/?project={project.slug}").content.decode()
    row = report.split('data-rule="loss-high"')[1].split("</tr>")[0]
    return {"human": 'data-handling="human decision"' in section, "neither": 'data-handling="neither"' in section,
            "never_triaged": 'data-flag="never_triaged"' in row}


def test_before_any_decision_the_incident_is_handled_by_neither(owner, project, spike):
    assert handled(client_for(owner), project) == {"human": False, "neither": True, "never_triaged": True}


def test_an_intervene_decision_in_a_review_of_its_alert_handles_the_incident(owner, project, spike):
    client = client_for(owner)
    decide(client, open_review("spiked", alert=spike), decision="intervene", action="skip the batch at step 21")
    assert handled(client, project) == {"human": True, "neither": False, "never_triaged": False}


def test_a_terminate_decision_naming_the_incident_in_its_links_handles_it(owner, project, spike):
    client = client_for(owner)
    decide(client, open_review("spiked"), decision="terminate", artifacts_preserved=True,
           links={"incidents": [spike.incident_id]})
    assert handled(client, project) == {"human": True, "neither": False, "never_triaged": False}
    spike.refresh_from_db()
    assert spike.reviewed_at is not None


def test_a_decision_naming_nothing_handles_nothing(owner, project, spike):
    client = client_for(owner)
    decide(client, open_review("spiked"), decision="continue")
    assert handled(client, project) == {"human": False, "neither": True, "never_triaged": True}
