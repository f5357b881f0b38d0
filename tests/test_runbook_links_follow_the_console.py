"""Starter rules store their runbook link with the console's address of the day; the console's pages open it where
the console runs now (a later `WL_PORT=…`), and leave every other link as stored."""
import json

import pytest
from django.test import Client

from alerts.models import Rule
from alerts.starter import install_starter_pack

pytestmark = pytest.mark.django_db


@pytest.fixture
def alerted_run(settings, sender, project, owner):
    settings.CONSOLE_URL = "http://127.0.0.1:8000"
    install_starter_pack(project)
    Rule.objects.filter(project=project, name="nonfinite-weights").update(diagnostic_url="https://wiki.example/runbooks/grads")
    settings.CONSOLE_URL = "http://127.0.0.1:8811"  # started again on another port
    points = [{"step": 0, "metric": "loss", "value": "NaN"}, {"step": 0, "metric": "weight_norm", "component": "layers.0", "value": "NaN"}]
    assert sender.post({"run": {"id": "moved"}, "points": points}).status_code == 202
    client = Client()
    client.force_login(owner)
    return client


def test_the_run_page_opens_the_console_s_own_runbooks_here(alerted_run):
    html = alerted_run.get("/runs/moved/").content.decode()
    assert 'href="/runbooks/nonfinite-loss/"' in html and 'href="http://127.0.0.1:8000' not in html
    assert 'href="https://wiki.example/runbooks/grads"' in html
    chart = json.loads(html.split('id="run-chart-data" type="application/json">')[1].split("</script>")[0])
    spike = Rule.objects.get(name="loss-spike")
    assert chart["links"][str(spike.pk)] == "/runbooks/loss-spike/"  # what a live alert's row links to


def test_the_inbox_opens_the_console_s_own_runbooks_here(alerted_run):
    html = alerted_run.get("/inbox/").content.decode()
    assert 'href="/runbooks/nonfinite-loss/"' in html and 'href="http://127.0.0.1:8000' not in html
    assert 'href="https://wiki.example/runbooks/grads"' in html


def test_the_api_keeps_the_stored_link(alerted_run):
    spike = Rule.objects.get(name="loss-spike")
    assert alerted_run.get(f"/api/v1/rules/{spike.pk}/").json()["diagnostic_url"] == "http://127.0.0.1:8000/runbooks/loss-spike/"
