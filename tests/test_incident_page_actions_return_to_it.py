"""Acting from an incident's page (acknowledge, verdict, mute, resolve an alert of it, "Review this incident") brings
the reviewer back to that page, with the answer shown there, not to the inbox's first page. The same actions from
the inbox still answer on the inbox; a `next` that is not a path of this console is ignored."""
import re

import pytest

from alerts.models import Alert, AlertState
from reviews.models import Review
from tests.factories import client_for
from tests.incident_support import two_alert_incident

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident(project):
    return two_alert_incident(project)


def page_form(html, action_part):
    """The form on the incident page posting to `action_part`, as (action, its fields)."""
    for form in re.findall(r"<form[^>]*>.*?</form>", html, re.S):
        action = re.search(r'action="([^"]*)"', form).group(1).replace("&amp;", "&")
        if action_part in action:
            return action, dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form))
    raise AssertionError(f"no form posting to {action_part}")


def test_acknowledge_verdict_and_mute_from_the_incident_page_come_back_to_it(incident, owner):
    made, alerts = incident
    client = client_for(owner)
    here = f"/incidents/{made.pk}/"
    for action, extra in (("acknowledge", {}), ("verdict", {"verdict": "actionable", "note": "real"}),
                          ("mute", {"scope": "run", "reason": "known bad node", "duration_minutes": "60"})):
        html = client.get(here).content.decode()
        url, fields = page_form(html, f"/inbox/incidents/{made.pk}/{action}/")
        answer = client.post(url, {**fields, **extra})
        assert answer.status_code == 302 and answer["Location"] == here, action
        assert 'id="incident-messages"' in client.get(here).content.decode()
    assert {a.verdict for a in Alert.objects.filter(incident=made)} == {"actionable"}


def test_a_refused_action_from_the_incident_page_says_why_there(incident, owner):
    made, _ = incident
    client = client_for(owner)
    here = f"/incidents/{made.pk}/"
    url, fields = page_form(client.get(here).content.decode(), f"/inbox/incidents/{made.pk}/verdict/")
    answer = client.post(url, {**fields, "verdict": "false_alarm", "note": ""})  # a false alarm needs a note
    assert answer.status_code == 302 and answer["Location"] == here
    shown = client.get(here).content.decode()
    messages = shown[shown.index('id="incident-messages"'):]
    assert "Note:" in messages[:messages.index("</ul>")]
    assert not Alert.objects.filter(incident=made, verdict="false_alarm").exists()


def test_resolving_one_of_its_alerts_with_the_page_as_next_comes_back_to_it(incident, owner):
    made, alerts = incident
    answer = client_for(owner).post(f"/inbox/alerts/{alerts[0].pk}/resolve/",
                                    {"next": f"/incidents/{made.pk}/", "note": "restarted the node"})
    assert answer.status_code == 302 and answer["Location"] == f"/incidents/{made.pk}/"
    assert Alert.objects.get(pk=alerts[0].pk).state == AlertState.RESOLVED


def test_review_this_incident_is_on_its_page_and_opens_its_review(incident, owner):
    made, _ = incident
    client = client_for(owner)
    html = client.get(f"/incidents/{made.pk}/").content.decode()
    url, fields = page_form(html, "/reviews/new/")
    assert fields["incident"] == str(made.pk) and fields["next"] == f"/incidents/{made.pk}/"
    answer = client.post(url, fields)
    review = Review.objects.get(incident=made)
    assert answer.status_code == 302 and answer["Location"] == f"/reviews/{review.pk}/"
    # A refused one (an incident not of this run) comes back to the page it was asked from.
    refused = client.post(url, {**fields, "incident": "999999"})
    assert refused.status_code == 302 and refused["Location"] == f"/incidents/{made.pk}/"


def test_the_inbox_still_answers_on_the_inbox(incident, project, owner):
    made, _ = incident
    answer = client_for(owner).post(f"/inbox/incidents/{made.pk}/acknowledge/?state=all&project={project.slug}")
    assert answer.status_code == 302 and answer["Location"] == f"/inbox/?state=all&project={project.slug}"


@pytest.mark.parametrize("elsewhere", ["https://evil.example/", "//evil.example/", "/\\evil.example/", "incidents/1/",
                                       "javascript:alert(1)", "/\r\nLocation: https://evil.example/"])
def test_a_next_off_this_console_is_ignored(incident, project, owner, elsewhere):
    made, _ = incident
    answer = client_for(owner).post(f"/inbox/incidents/{made.pk}/acknowledge/?state=all&project={project.slug}",
                                    {"next": elsewhere})
    assert answer.status_code == 302 and answer["Location"] == f"/inbox/?state=all&project={project.slug}"
