"""A review about an incident links to the incident's own page (/incidents/<id>/: its chart, alerts, history and
actions), not to an inbox anchor that a filtered inbox may not even show."""
import re

import pytest

from alerts.models import Alert
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


def test_the_review_links_its_incident_to_the_incidents_page(sender, project, owner):
    make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0}, response="notify")
    points = [{"step": s, "metric": "loss", "value": 20.0 if s in (21, 22) else 2.0} for s in range(40)]
    assert sender.post({"run": {"id": "spiked"}, "points": points}).status_code == 202
    incident = Alert.objects.get().incident
    client = client_for(owner)
    opened = client.post("/reviews/new/", {"run": "spiked", "incident": incident.pk})
    assert opened.status_code == 302
    page = client.get(opened["Location"]).content.decode()
    about = re.search(r'<span id="review-incident"[^>]*>.*?</span>', page, re.S).group(0)
    assert f'href="/incidents/{incident.pk}/"' in about
    assert "#incident-" not in about
    assert client.get(f"/incidents/{incident.pk}/").status_code == 200
