"""The inbox carries each action form once for the page (static/js/inbox-panels.js copies it into a row when its
panel opens); without JavaScript a row's panel holds a link that opens the inbox with that row's form in it."""
import re

import pytest

from alerts.incidents import group_new_alerts
from alerts.models import Alert, Verdict
from tests.factories import client_for, make_alert, make_rule

pytestmark = pytest.mark.django_db


@pytest.fixture
def alerts(project):
    rule = make_rule(project, "loss-spike")
    made = [make_alert(rule, component=f"layers.{i}") for i in range(6)]
    return made


def test_the_page_holds_each_form_once_not_once_a_row(owner, alerts):
    html = client_for(owner).get("/inbox/?state=open").content.decode()
    assert len(re.findall(r'<summary class="button" data-alert-id="\d+" data-action="verdict">', html)) == 6
    assert len(re.findall(r'<form class="act-panel" method="post" id="verdict-', html)) == 1  # the page's template
    assert 'id="verdict-__PK__"' in html and f'id="verdict-{alerts[0].pk}"' not in html
    for alert in alerts:
        assert f'href="/inbox/alerts/{alert.pk}/verdict/?state=open"' in html


def test_without_javascript_the_link_opens_the_rows_form_and_it_works(owner, alerts):
    client = client_for(owner)
    alert = alerts[2]
    response = client.get(f"/inbox/alerts/{alert.pk}/verdict/?state=open")
    html = response.content.decode()
    assert response.status_code == 200
    form = re.search(rf'<form class="act-panel" method="post" id="verdict-{alert.pk}"[^>]*action="([^"]+)"', html)
    assert form and form.group(1) == f"/inbox/alerts/{alert.pk}/verdict/?state=open"
    assert f'id="verdict-{alert.pk}-note"' in html and f'id="mute-{alert.pk}"' not in html
    posted = client.post(form.group(1), {"verdict": "actionable", "note": ""})
    assert posted.status_code == 302 and posted["Location"] == "/inbox/?state=open"
    assert Alert.objects.get(pk=alert.pk).verdict == Verdict.ACTIONABLE


def test_an_incidents_form_opens_the_same_way(owner, alerts):
    group_new_alerts(alerts[0].run)
    incident = Alert.objects.get(pk=alerts[0].pk).incident
    html = client_for(owner).get(f"/inbox/incidents/{incident.pk}/mute/").content.decode()
    assert f'id="incident-mute-{incident.pk}-reason"' in html
    assert 'id="incident-mute-__PK__"' in html  # and the page's template for the others


@pytest.mark.parametrize(("who", "status"), [("teammate", 403), ("outsider", 404)])
def test_only_people_who_may_act_open_a_form(request, alerts, who, status):
    response = client_for(request.getfixturevalue(who)).get(f"/inbox/alerts/{alerts[0].pk}/verdict/")
    assert response.status_code == status
