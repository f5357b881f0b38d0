"""A run whose incident ended by itself with nobody's word on it (no verdict, no acknowledgement, no decision naming
it) is marked "needs review" on the runs list, its page and the inbox's default view, until a person acts."""
import pytest

from alerts import triage
from alerts.models import Alert
from ingest.models import Run
from tests.factories import make_rule
from tests.review_support import open_review

pytestmark = pytest.mark.django_db


def send(sender, run_id, values):
    points = [{"step": step, "metric": "loss", "value": value} for step, value in values]
    assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202


@pytest.fixture
def spike(sender, project):
    """A loss spike that fired an ordinary (not hard-invariant) rule and cleared by itself; a clean sibling."""
    make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0})
    send(sender, "spiked", [(s, 20.0 if s in (21, 22) else 2.0) for s in range(40)])
    send(sender, "clean", [(s, 2.0) for s in range(40)])
    [alert] = Alert.objects.select_related("rule", "run")
    assert alert.state == "resolved" and alert.incident_id is not None
    return alert


def row_of(page, run_id):
    return page.split(f'data-run="{run_id}"')[1].split("</tr>")[0]


def marks(client):
    runs = client.get("/").content.decode()
    run_page = client.get("/runs/spiked/").content.decode()
    inbox = client.get("/inbox/").content.decode()
    return {
        "list": "needs review" in row_of(runs, "spiked"),
        "page": 'id="run-needs-review"' in run_page,
        "inbox": 'id="inbox-needs-review"' in inbox and "/runs/spiked/" in inbox.split('id="inbox-needs-review"')[1].split("</p>")[0],
    }


def test_a_spike_nobody_judged_marks_the_run_everywhere_until_a_verdict(client, owner, spike):
    client.force_login(owner)
    assert marks(client) == {"list": True, "page": True, "inbox": True}
    runs = client.get("/").content.decode()
    assert "needs review" not in row_of(runs, "clean")
    assert 'id="run-needs-review"' not in client.get("/runs/clean/").content.decode()
    run_page = client.get("/runs/spiked/").content.decode()
    assert "loss-high at step 21" in run_page
    inbox = client.get("/inbox/").content.decode()
    assert "No open alerts, but 1 run needs review" in inbox
    assert "/runs/clean/" not in inbox.split('id="inbox-needs-review"')[1].split("</p>")[0]

    triage.give_verdict(spike, owner, "false_alarm", note="one bad batch")
    assert marks(client) == {"list": False, "page": False, "inbox": False}
    assert "No open alerts." in client.get("/inbox/").content.decode()


def test_a_decision_in_a_review_of_the_incident_clears_the_mark(client, owner, spike):
    client.force_login(owner)
    assert marks(client) == {"list": True, "page": True, "inbox": True}
    review = open_review("spiked", incident=spike.incident)
    answer = client.post(f"/api/v1/reviews/{review.pk}/decision/", {
        "decision": "continue", "observation": "a bad batch; the loss came back", "explanations": ["data"],
    }, content_type="application/json")
    assert answer.status_code == 201, answer.content
    assert marks(client) == {"list": False, "page": False, "inbox": False}


def test_the_mark_follows_the_inbox_filters(client, owner, spike, other_project):
    client.force_login(owner)
    assert 'id="inbox-needs-review"' not in client.get(f"/inbox/?project={other_project.slug}").content.decode()
    assert 'id="inbox-needs-review"' not in client.get("/inbox/?state=all").content.decode()
    assert Run.objects.get(run_id="spiked").status != "alerting"


def test_a_decision_on_a_nan_incident_waiting_for_review_ends_the_wait(client, owner, sender, project):
    from tests.incident_support import healthy, starter_project

    starter_project(project)
    points = healthy(range(0, 60), health=False)
    points[31]["value"] = "NaN"
    assert sender.post({"run": {"id": "blip"}, "points": points}).status_code == 202
    [alert] = Alert.objects.all()
    assert alert.incident.state == "needs_review"
    client.force_login(owner)
    review = open_review("blip", alert=alert)
    answer = client.post(f"/api/v1/reviews/{review.pk}/decision/", {
        "decision": "continue", "observation": "one NaN, the loss is finite since", "explanations": ["fp16 overflow"],
    }, content_type="application/json")
    assert answer.status_code == 201, answer.content
    alert.incident.refresh_from_db()
    assert alert.incident.state == "resolved"
    assert 'id="run-needs-review"' not in client.get("/runs/blip/").content.decode()
    assert "needs review" not in client.get("/inbox/").content.decode()
