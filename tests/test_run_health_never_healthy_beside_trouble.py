"""A run is never called "Healthy" beside trouble: with an open incident its header and its runs-list row say
"Alerting", with an incident that ended with nobody's word on it they say "Recovered" (beside "needs review"), and
its live status frame carries the same word, whatever the stored status of its last batch says."""
import pytest

from alerts import triage
from alerts.health import health_frame
from alerts.incidents import group_new_alerts
from alerts.models import Alert
from ingest.models import Run
from opsconsole.live import publish_status
from tests.factories import client_for, make_alert, make_rule
from tests.page_text_support import Visible

pytestmark = pytest.mark.django_db


def send(sender, run_id, values):
    points = [{"step": step, "metric": "loss", "value": value} for step, value in values]
    assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202


def header_badge(client, run_id):
    html = client.get(f"/runs/{run_id}/").content.decode()
    badge = html.split('id="run-status">')[1].split("</span>")[0]
    page = Visible()
    page.feed(html)
    return badge, page.texts


def list_badge(client, run_id):
    row = client.get("/").content.decode().split(f'data-run="{run_id}"')[1].split("</tr>")[0]
    return row.split('class="status status-')[1].split("</span>")[0].split(">")[1]


@pytest.fixture
def spiked(sender, project):
    """A loss spike that fired an ordinary rule and cleared by itself: the stored status is healthy again."""
    make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0})
    send(sender, "spiked", [(s, 20.0 if s in (21, 22) else 2.0) for s in range(40)])
    assert Run.objects.get(run_id="spiked").status == "healthy"
    return Alert.objects.select_related("rule", "run").get()


def test_a_firing_incident_reads_alerting_even_when_the_last_batch_was_quiet(project, owner):
    run = Run.objects.create(project=project, run_id="quiet-batch", status="healthy")
    make_alert(make_rule(project), run, "layers.1")
    group_new_alerts(run)
    assert run.incidents.get().state == "firing"
    client = client_for(owner)
    badge, texts = header_badge(client, "quiet-batch")
    assert badge == "Alerting"
    assert "Healthy" not in texts
    assert list_badge(client, "quiet-batch") == "Alerting"


def test_an_incident_nobody_looked_at_reads_recovered_until_a_verdict(spiked, owner):
    client = client_for(owner)
    badge, texts = header_badge(client, "spiked")
    assert badge == "Recovered" and "needs review" in texts and "Healthy" not in texts
    assert list_badge(client, "spiked") == "Recovered"

    triage.give_verdict(spiked, owner, "false_alarm", note="one bad batch")
    assert header_badge(client, "spiked")[0] == "Healthy"
    assert list_badge(client, "spiked") == "Healthy"


def test_the_live_status_frame_carries_the_same_word(spiked, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("opsconsole.live.send_now", lambda items: sent.extend(items) or True)
    run = spiked.run
    with django_capture_on_commit_callbacks(execute=True):
        publish_status(run, "healthy", "alerting", health=lambda: health_frame(run))
    [(_, head, frame)] = [item for item in sent if item[1]["type"] == "run"]
    assert frame() | head == {"type": "run", "run": "spiked", "status": "healthy", "previous": "alerting",
                              "last_step": 39, "health": "recovered", "label": "Recovered"}


def listed(client, status):
    """The run ids the runs list shows under its status filter."""
    html = client.get(f"/?status={status}").content.decode()
    return {part.split('"')[0] for part in html.split('data-run="')[1:]}


def test_the_runs_lists_status_filter_goes_by_the_badge_not_the_stored_status(spiked, project, owner):
    quiet = Run.objects.create(project=project, run_id="quiet-batch", status="healthy")
    make_alert(make_rule(project, "grad-high"), quiet, "layers.1")
    group_new_alerts(quiet)
    Run.objects.create(project=project, run_id="calm", status="healthy")
    client = client_for(owner)
    # Both troubled runs are stored "healthy"; only the calm one may be listed as Healthy.
    assert listed(client, "healthy") == {"calm"}
    assert "quiet-batch" in listed(client, "alerting")
    assert "spiked" not in listed(client, "alerting")  # recovered, not alerting: it is under neither filter
