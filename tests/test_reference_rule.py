"""The `reference` rule kind: a run judged against the project's reference runs at the same step. It names what
the run's own history cannot: a failed restore that never recovered ends 20% above every sibling seed."""
import numpy as np
import pytest

from alerts.models import Alert, Rule
from alerts.rules import save_rule
from alerts.starter import install_starter_pack
from ingest.models import Run
from tests.real_runs_support import import_real

pytestmark = pytest.mark.django_db


def loss(step, seed, shifted_from=None):
    rng = np.random.default_rng([seed, step])
    value = 2.0 * np.exp(-step / 2000) + 2.0 + rng.normal(0, 0.02)
    return value * (1.2 if shifted_from is not None and step >= shifted_from else 1.0)


def send(sender, run_id, seed, shifted_from=None, steps=3000):
    for first in range(0, steps, 500):
        points = [{"step": s, "metric": "loss", "value": loss(s, seed, shifted_from)} for s in range(first, first + 500)]
        assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202


def reference_only(project):
    install_starter_pack(project)
    Rule.objects.filter(project=project).exclude(name="reference-gap").update(enabled=False)


def test_a_run_that_ends_above_every_reference_is_alerted_and_stays_open(sender, project):
    reference_only(project)
    send(sender, "sibling-1", seed=1)
    send(sender, "sibling-2", seed=2)
    Run.objects.filter(run_id__startswith="sibling").update(reference=True)
    send(sender, "broken", seed=3, shifted_from=1500)
    [alert] = Alert.objects.filter(run__run_id="broken")
    assert (alert.rule.name, alert.first_step) == ("reference-gap", 1500)
    assert alert.fired_step == 1519  # persistence: 20 points
    assert alert.state == "firing" and alert.last_step == 2999
    assert alert.magnitude == pytest.approx(1.2, abs=0.05)  # × the highest reference


def test_a_healthy_sibling_is_quiet_and_a_project_without_references_is_quiet(sender, project):
    reference_only(project)
    send(sender, "lonely", seed=3, shifted_from=1500)  # no reference run yet: nothing to judge against
    send(sender, "sibling-1", seed=1)
    Run.objects.filter(run_id="sibling-1").update(reference=True)
    send(sender, "healthy", seed=4)
    assert list(Alert.objects.values_list("run__run_id", flat=True)) == []


def test_the_real_failed_restore_is_named_against_its_sibling_seed(project, token, django_capture_on_commit_callbacks):
    install_starter_pack(project)
    import_real(token, django_capture_on_commit_callbacks, "pythia-410m-seed8")
    Run.objects.filter(run_id="pythia-410m-seed8").update(reference=True)
    import_real(token, django_capture_on_commit_callbacks, "pythia-410m-seed4")
    gaps = list(Alert.objects.filter(run__run_id="pythia-410m-seed4", rule__name="reference-gap").order_by("first_step"))
    assert gaps and all(a.first_step >= 122002 for a in gaps)  # nothing before the failed restore
    assert gaps[0].fired_step - 122002 <= 100
    assert gaps[-1].state != "resolved" and gaps[-1].last_step == 143000
