"""The synthetic healthy job the fault-class tests bend is itself quiet under the whole starter pack: a test of
a fault class proves its rule fires on the fault, not on the job."""
import pytest

from tests.engine_support import Job, alerts, starter

pytestmark = pytest.mark.django_db


def test_a_healthy_job_raises_nothing(sender, project):
    starter(project)
    Job().send(sender, "healthy", 0, 1500, phases=[{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}])
    assert [(a.rule.name, a.component, a.first_step) for a in alerts("healthy")] == []
