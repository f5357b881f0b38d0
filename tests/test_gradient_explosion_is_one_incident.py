"""A label-corruption onset: every component's gradients explode at one step. That is one incident, named
after the component furthest beyond its band; a throughput dip elsewhere in the run is an incident of its own."""
import numpy as np
import pytest

from alerts.models import Alert
from tests.incident_support import COMPONENTS, incidents, send, starter_project

pytestmark = pytest.mark.django_db


def gradients(steps, onset=None, factor=None, seed=1):
    rng = np.random.default_rng(seed)
    points = []
    for step in steps:
        points.append({"step": step, "metric": "loss", "value": 2.0})
        for i, component in enumerate(COMPONENTS):
            value = 1 + 0.1 * i + rng.normal(0, 0.02)
            if onset is not None and step >= onset:
                value *= factor(component)
            points.append({"step": step, "metric": "grad_norm", "component": component, "value": float(value)})
    return points


def test_ten_gradient_explosions_at_one_step_are_one_incident(sender, project):
    starter_project(project)
    worst = "layers.6"
    send(sender, "labels", gradients(range(0, 150)))
    send(sender, "labels", gradients(range(150, 160), onset=150, factor=lambda c: 300.0 if c == worst else 100.0))

    alerts = list(Alert.objects.filter(rule__name="gradient-explosion"))
    assert len(alerts) == len(COMPONENTS) and {a.first_step for a in alerts} == {150}
    [incident] = incidents("labels")
    assert incident.alerts.count() == len(COMPONENTS)
    assert (incident.origin.component, incident.origin.metric, incident.first_step) == (worst, "grad_norm", 150)


def test_alerts_far_apart_or_not_linked_are_incidents_of_their_own(sender, project):
    starter_project(project)
    send(sender, "apart", gradients(range(0, 150)))
    # Gradients explode at 150; a NaN loss at 400 is another fault, far outside the window.
    send(sender, "apart", gradients(range(150, 160), onset=150, factor=lambda c: 100.0))
    send(sender, "apart", gradients(range(160, 400), seed=2) + [{"step": 400, "metric": "loss", "value": "NaN"}])
    found = incidents("apart")
    assert [(i.first_step, i.origin.rule.name) for i in found] == [(150, "gradient-explosion"), (400, "nonfinite-loss")]
    assert found[1].alerts.count() == 1
