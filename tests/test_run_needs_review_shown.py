"""A run whose hard invariant cleared with nobody looking shows "needs review" on the runs list and its page,
until someone acknowledges the alert or gives a verdict."""
import pytest

from alerts import triage
from alerts.models import Alert
from tests.incident_support import healthy, send, starter_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def blip(sender, project):
    starter_project(project)
    points = healthy(range(0, 60), health=False)
    points[31]["value"] = "NaN"
    send(sender, "blip", points)
    send(sender, "clean", healthy(range(0, 60), health=False))
    [alert] = Alert.objects.select_related("rule", "run")
    assert alert.state == "resolved"
    return alert


def test_the_runs_list_and_the_run_page_say_needs_review_until_acknowledged(client, owner, blip):
    client.force_login(owner)
    runs = client.get("/").content.decode()
    blip_row = runs.split('data-run="blip"')[1].split("</tr>")[0]
    clean_row = runs.split('data-run="clean"')[1].split("</tr>")[0]
    # Its points are fine again, but it is never called healthy while nobody has looked (alerts/health.py).
    assert "Recovered" in blip_row and "needs review" in blip_row and "Healthy" not in blip_row
    assert "needs review" not in clean_row
    run_page = client.get("/runs/blip/").content.decode()
    assert 'id="run-needs-review"' in run_page and "nonfinite-loss at step 31" in run_page
    assert 'id="run-needs-review"' not in client.get("/runs/clean/").content.decode()

    triage.acknowledge(blip, owner)
    blip_row = client.get("/").content.decode().split('data-run="blip"')[1].split("</tr>")[0]
    assert "needs review" not in blip_row and "Healthy" in blip_row
    assert 'id="run-needs-review"' not in client.get("/runs/blip/").content.decode()
