"""The webhook's incident link (/inbox/?state=all&project=…#incident-N) lands on the incident, resolved or not;
each alert row links to its own anchor; the run page leads with the run's open or unreviewed incidents."""
import pytest

from alerts.models import Alert, AlertState
from notifications.routing import incident_url
from tests.factories import client_for
from tests.incident_support import two_alert_incident


@pytest.fixture
def incident(project):
    return two_alert_incident(project)


def _link(incident, project):
    url = incident_url(incident, project)
    path, anchor = url.split("#")
    return path[path.index("/inbox/"):], anchor


@pytest.mark.django_db
def test_the_incident_link_shows_a_resolved_incident_with_its_anchor(incident, project, owner, teammate):
    made, alerts = incident
    Alert.objects.filter(pk__in=[a.pk for a in alerts]).update(state=AlertState.RESOLVED)
    path, anchor = _link(made, project)
    for user in (owner, teammate):
        html = client_for(user).get(path).content.decode()
        assert f'id="{anchor}"' in html
        # each member alert has an anchor of its own, and the incident row links to it
        for alert in alerts:
            assert f'id="alert-{alert.pk}"' in html
            assert f'href="#alert-{alert.pk}"' in html or f'href="/inbox/?state=all#alert-{alert.pk}"' in html


@pytest.mark.django_db
def test_an_outsider_following_the_link_sees_no_incident(incident, project, outsider):
    made, _ = incident
    path, anchor = _link(made, project)
    html = client_for(outsider).get(path).content.decode()
    assert f'id="{anchor}"' not in html


@pytest.mark.django_db
def test_the_run_page_leads_with_its_open_incident(incident, project, owner):
    made, alerts = incident
    html = client_for(owner).get("/runs/llama-ft-7/").content.decode()
    card = html.index('id="run-incidents"')
    assert card < html.index("<h2>Identity</h2>")
    assert f'href="/inbox/?state=all&amp;project={project.slug}#incident-{made.pk}"' in html
    assert "weight_norm of layers.4" in html[card:html.index("<h2>Identity</h2>")]


@pytest.mark.django_db
def test_the_incident_has_its_own_page_for_members_only(incident, project, owner, teammate, outsider):
    made, alerts = incident
    from alerts.incident_actions import acknowledge_incident
    acknowledge_incident(made, owner)
    for user in (owner, teammate):
        response = client_for(user).get(f"/incidents/{made.pk}/")
        assert response.status_code == 200
        html = response.content.decode()
        assert "weight_norm of layers.4 at step 30" in html  # its origin
        # the chart at its steps: the run page zoomed around the incident, on the origin's metric
        assert f'href="/runs/llama-ft-7/?metric=weight_norm&amp;component=layers.4&amp;start=0&amp;end=' in html
        for alert in alerts:  # each alert, linked to its own row of the inbox
            assert f'id="alert-{alert.pk}"' in html and f"#alert-{alert.pk}" in html
        changes = html[html.index('id="incident-changes"'):]
        assert "fired" in changes and "acknowledged" in changes and "olivia" in changes
    owner_page = client_for(owner).get(f"/incidents/{made.pk}/").content.decode()
    assert f'action="/inbox/incidents/{made.pk}/verdict/?state=all&amp;project={project.slug}"' in owner_page
    assert f'/inbox/incidents/{made.pk}/mute/' in owner_page
    assert "/verdict/" not in client_for(teammate).get(f"/incidents/{made.pk}/").content.decode()  # a viewer reads only
    assert client_for(outsider).get(f"/incidents/{made.pk}/").status_code == 404
    assert client_for(None).get(f"/incidents/{made.pk}/").status_code == 302  # to the login page
    # the inbox and the run page link to it
    assert f'href="/incidents/{made.pk}/"' in client_for(owner).get("/inbox/?state=all").content.decode()
    assert f'href="/incidents/{made.pk}/"' in client_for(owner).get("/runs/llama-ft-7/").content.decode()


@pytest.mark.django_db
def test_a_verdict_given_on_the_incident_page_lands_on_each_alert(incident, project, owner):
    made, alerts = incident
    response = client_for(owner).post(f"/inbox/incidents/{made.pk}/verdict/?state=all&project={project.slug}",
                                      {"verdict": "actionable", "note": "the NaN was real"})
    assert response.status_code == 302 and response["Location"] == f"/inbox/?state=all&project={project.slug}"
    assert {a.verdict for a in Alert.objects.filter(pk__in=[a.pk for a in alerts])} == {"actionable"}
    changes = client_for(owner).get(f"/incidents/{made.pk}/").content.decode()
    assert "the NaN was real" in changes[changes.index('id="incident-changes"'):]
