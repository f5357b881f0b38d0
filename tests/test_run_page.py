"""The run page: identity, alerts, layer sections, components ordered by when they first went wrong; access."""
import hashlib
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from alerts.starter import install_starter_pack

pytestmark = pytest.mark.django_db


@pytest.fixture
def troubled_run(sender, project):
    install_starter_pack(project)
    points = []
    for step in range(60):
        points.append({"step": step, "metric": "loss", "value": 2.0})
        points.append({"step": step, "metric": "throughput", "value": 1000.0})
        for component in ("blocks.0", "blocks.1", "blocks.2"):
            bad = (component == "blocks.2" and step >= 30) or (component == "blocks.0" and step >= 40)
            points.append({"step": step, "metric": "grad_norm", "component": component, "value": "NaN" if bad else 1.0})
    body = {"run": {"id": "team/run-7", "code_rev": "abc123", "tags": {"team": "pretrain"}},
            "phases": [{"step": 0, "phase": "warmup"}, {"step": 10, "phase": "steady"}], "points": points}
    assert sender.post(body).status_code == 202
    assert sender.post({"run": {"id": "team/run-7", "code_rev": "def456"}, "points": [{"step": 60, "metric": "loss", "value": 2.0}]}).status_code == 202


def page(user):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client.get("/runs/team/run-7/")


def test_the_run_page_shows_identity_alerts_and_the_first_component_to_go_wrong_first(owner, troubled_run):
    response = page(owner)
    assert response.status_code == 200
    html = response.content.decode()
    assert "abc123" in html and "def456" in html  # the identity change is shown, old and new
    assert "nonfinite-gradients" in html
    ranking = html[html.index("First to go wrong"):]
    assert ranking.index("blocks.2") < ranking.index("blocks.0")
    grads = html[html.index('data-metric="grad_norm" data-component='):]
    order = [c for c in ("blocks.0", "blocks.1", "blocks.2")]
    positions = sorted(order, key=lambda c: grads.index(f'data-component="{c}"'))
    assert positions == ["blocks.2", "blocks.0", "blocks.1"]
    chart = json.loads(html.split('id="run-chart-data" type="application/json">')[1].split("</script>")[0])
    assert chart["run"] == "team/run-7" and chart["headline"] == "loss"
    assert [p["kind"] for p in chart["phases"]] == ["warmup"]
    assert {a["component"] for a in chart["alerts"]} == {"blocks.0", "blocks.2"}
    assert "vendor/plotly/plotly-basic.min.js" in html


def test_the_page_is_for_members_only(owner, teammate, outsider, troubled_run):
    assert page(teammate).status_code == 200
    assert page(outsider).status_code == 404
    anonymous = page(None)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_plotly_is_served_by_the_console_itself(owner, troubled_run):
    # The vendored npm bundle (bin/vendor-plotly), byte for byte what its SHA256SUMS records, its licence beside it.
    client = Client()
    response = client.get("/static/vendor/plotly/plotly-basic.min.js")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert b"plotly.js (basic - minified) v" in body[:400]
    recorded = (Path(settings.BASE_DIR) / "static/vendor/plotly/SHA256SUMS").read_text()
    assert f"{hashlib.sha256(body).hexdigest()}  plotly-basic.min.js" in recorded.splitlines()
    licence = client.get("/static/vendor/plotly/LICENSE")
    assert licence.status_code == 200 and b"Plotly" in b"".join(licence.streaming_content)
