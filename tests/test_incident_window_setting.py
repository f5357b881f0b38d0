"""The window within which alerts' first steps may form one incident is a project setting, checked when saved."""
import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from alerts.incidents import window_steps
from alerts.models import DEFAULT_INCIDENT_WINDOW_STEPS, MAX_INCIDENT_WINDOW_STEPS, IncidentSettings
from tests.incident_support import COMPONENTS, healthy, incidents, nan_in_one_weight, send, starter_project

pytestmark = pytest.mark.django_db


def loss_then_components(sender, run_id):
    """The loss goes NaN at 31; the components are seen at the next health sample, step 40."""
    send(sender, run_id, healthy(range(0, 31)) + [{"step": 31, "metric": "loss", "value": "NaN"}])
    send(sender, run_id, [{"step": s, "metric": "loss", "value": "NaN"} for s in range(32, 40)] + nan_in_one_weight(40))


def test_by_default_a_health_sample_later_is_the_same_incident(sender, project):
    starter_project(project)
    assert window_steps(project.pk) == DEFAULT_INCIDENT_WINDOW_STEPS
    loss_then_components(sender, "default")
    [incident] = incidents("default")
    assert incident.alerts.count() == len(COMPONENTS) + 1


def test_a_project_with_a_narrower_window_keeps_them_apart(sender, project):
    starter_project(project)
    IncidentSettings.objects.create(project=project, window_steps=5)
    loss_then_components(sender, "narrow")
    first, second = incidents("narrow")
    assert (first.first_step, first.alerts.count(), first.origin.metric) == (31, 1, "loss")
    assert (second.first_step, second.alerts.count(), second.origin.component) == (40, len(COMPONENTS), "layers.4")


@pytest.mark.parametrize("bad", [-1, MAX_INCIDENT_WINDOW_STEPS + 1, "ten"])
def test_a_window_out_of_range_is_refused_by_name(project, bad):
    with pytest.raises(ValidationError) as error:
        IncidentSettings(project=project, window_steps=bad).full_clean()
    assert "window_steps" in error.value.message_dict


def test_the_database_refuses_one_written_around_validation(project):
    with pytest.raises(IntegrityError), transaction.atomic():
        IncidentSettings.objects.create(project=project, window_steps=MAX_INCIDENT_WINDOW_STEPS + 1)
    IncidentSettings(project=project, window_steps=0).full_clean()  # 0: only alerts of one step together
