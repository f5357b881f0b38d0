"""One NaN written into one weight: its weight norm, every other component's gradient norm and the loss go
non-finite at one step. That is one incident, and its origin is the component whose weights went first."""
import pytest

from alerts.models import Alert, IncidentChange
from tests.incident_support import COMPONENTS, healthy, incidents, nan_in_one_weight, send, starter_project

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("bad", ["layers.4", "layers.9"])
def test_the_alerts_of_one_nan_form_one_incident_naming_its_component(sender, project, bad):
    starter_project(project)
    send(sender, "one-nan", healthy(range(0, 30)) + nan_in_one_weight(30, bad=bad))

    alerts = list(Alert.objects.select_related("rule"))
    assert len(alerts) == len(COMPONENTS) + 1  # every component and the loss: the pages one fault gave before
    [incident] = incidents("one-nan")
    assert incident.alerts.count() == len(alerts)
    assert (incident.origin.component, incident.origin.metric, incident.first_step) == (bad, "weight_norm", 30)
    assert (incident.state, incident.severity) == ("firing", "notify")
    assert list(IncidentChange.objects.values_list("kind", flat=True)) == ["opened"]


def test_a_later_alert_joins_the_open_incident_and_the_origin_is_judged_again(sender, project):
    """With health sampled every 10 steps the loss goes NaN at step 31 and the components are seen at the
    next sample, step 40, in the next batch: one incident, whose origin moves from the loss to the weights."""
    starter_project(project)
    send(sender, "sampled", healthy(range(0, 31)) + [{"step": 31, "metric": "loss", "value": "NaN"}])
    [incident] = incidents("sampled")
    assert (incident.origin.metric, incident.origin.component, incident.first_step) == ("loss", "", 31)

    send(sender, "sampled", [{"step": s, "metric": "loss", "value": "NaN"} for s in range(32, 40)]
         + nan_in_one_weight(40, bad="layers.7"))
    [incident] = incidents("sampled")
    assert incident.alerts.count() == len(COMPONENTS) + 1
    assert (incident.origin.component, incident.origin.metric, incident.first_step) == ("layers.7", "weight_norm", 31)
    kinds = list(incident.changes.values_list("kind", flat=True))
    assert kinds == ["opened"] + ["joined"] * len(COMPONENTS) + ["origin"]
    origin_row = incident.changes.get(kind="origin")
    assert origin_row.alert == incident.origin and "layers.7" in origin_row.note
