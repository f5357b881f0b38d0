"""A component's weights multiplied by 20 outside the optimizer: the gradients flowing back through it explode,
one overflows, the loss jumps. One incident, and its origin is the component whose weights jumped."""
import numpy as np
import pytest

from alerts.models import Alert
from alerts.starter import install_starter_pack
from tests.incident_support import incidents
from tests.test_weight_jump import healthy_run, multiply_weights, send

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("seed", [41, 42])
def test_the_jumped_component_is_the_origin_of_one_incident(sender, project, seed):
    install_starter_pack(project)
    rng = np.random.default_rng(seed)
    steps = np.arange(600)
    per_component, loss = healthy_run(rng, steps)
    at, component = multiply_weights(rng, per_component, loss, steps)
    send(sender, "jump", steps, per_component, loss)

    at_the_jump = Alert.objects.filter(first_step__gte=at, first_step__lte=at + 10)
    assert at_the_jump.count() > 1  # what used to be several pages
    [incident] = [i for i in incidents("jump") if i.first_step <= at + 10 and i.first_step >= at]
    assert (incident.origin.rule.name, incident.origin.component, incident.first_step) == ("weight-jump", component, at)
    assert set(at_the_jump.values_list("incident", flat=True)) == {incident.pk}
