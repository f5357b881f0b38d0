"""The webhook's incident link (/inbox/?state=all&project=…#incident-N) lands on the incident, resolved or not;
each alert row links to its own anchor; the run page leads with the run's open or unreviewed incidents."""
import pytest

from alerts.incidents import group_new_alerts
from alerts.models import Alert, AlertState
from ingest.models import Run
from notifications.routing import incident_url
from tests.factories import client_for, make_alert, make_rule


@pytest.fixture
def incident(project):
    health = make_rule(project, "nonfinite-gradients", kind="nonfinite", scope={"metrics": ["weight_norm", "grad_norm"]})
    alerts = [make_alert(health, "llama-ft-7", "layers.4", metric="weight_norm", first_step=30),
              make_alert(health, "llama-ft-7", "layers.1", metric="grad_norm", first_step=31)]
    [made] = group_new_alerts(Run.objects.get(run_id="llama-ft-7"))
    return made, alerts


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
