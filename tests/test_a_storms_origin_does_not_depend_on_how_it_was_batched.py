"""Every layer's weights non-finite at one step: one incident, named after the layer the run sent first, whether
the job sent that step in one batch or cut it between two (its alerts are then created in another order)."""
import pytest

from alerts.models import Alert
from tests.incident_support import COMPONENTS, healthy, incidents, send, starter_project

pytestmark = pytest.mark.django_db

STORM = 150


def storm_points(step, components):
    """The step as healthy() sends it, but every listed component's weights non-finite."""
    points = [p for p in healthy([step]) if p.get("component") in components or (p["metric"] == "loss" and components is COMPONENTS)]
    for point in points:
        if point["metric"] == "weight_norm":
            point["value"] = "NaN"
    return points


def after(components):
    """The steps after the storm, the weights still non-finite."""
    return [p for step in range(STORM + 1, STORM + 6) for p in storm_points(step, components)]


@pytest.mark.parametrize("cut", [False, True])
def test_a_storms_incident_is_named_after_the_layer_the_run_sent_first(sender, project, cut):
    starter_project(project)
    run_id = f"storm-{'cut' if cut else 'whole'}"
    send(sender, run_id, healthy(range(0, STORM)))
    if cut:  # the later layers' points of the storm's step first, the earlier ones' in the next batch
        send(sender, run_id, storm_points(STORM, COMPONENTS[5:]))
        send(sender, run_id, storm_points(STORM, COMPONENTS[:5]) + after(COMPONENTS))
    else:
        send(sender, run_id, storm_points(STORM, COMPONENTS) + after(COMPONENTS))

    weights = Alert.objects.filter(run__run_id=run_id, rule__name="nonfinite-weights")
    assert sorted(weights.values_list("component", flat=True)) == sorted(COMPONENTS)
    assert set(weights.values_list("first_step", flat=True)) == {STORM}
    [incident] = incidents(run_id)
    assert (incident.origin.rule.name, incident.origin.component, incident.first_step) == ("nonfinite-weights", "layers.0", STORM)
