"""Non-finite gradients are judged by rate: the isolated overflows a loss scaler skips by design (a few at the
start, one every few hundred steps) page nobody; persistent skipping pages once, named on the run when every
component goes at once; a non-finite weight pages at its first point."""
import pytest

from tests.engine_support import COMPONENTS, Job, alerts, incidents, rule_names, starter

pytestmark = pytest.mark.django_db
WARMUP = [{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}]


def overflow_at(steps):
    def bend(step, value):
        return float("inf") if step in steps else value
    return bend


def skipped(job, steps):
    for component in ["", *COMPONENTS]:
        job.override("grad_norm", overflow_at(steps), component=component)


def test_isolated_overflows_that_a_loss_scaler_skips_page_nobody(sender, project):
    starter(project)
    job = Job()
    skipped(job, {1, 2, 3, 4, 5, 230, 480, 710})
    job.send(sender, "amp", 0, 800, phases=WARMUP)
    assert rule_names("amp") == []


def test_persistent_skipping_pages_once_named_on_the_run(sender, project):
    starter(project)
    job = Job()
    skipped(job, set(range(400, 800)))
    job.send(sender, "skipping", 0, 600, phases=WARMUP)
    [incident] = incidents("skipping")
    assert incident.origin.rule.name == "nonfinite-gradients" and incident.origin.component == ""
    assert incident.origin.first_step == 402  # the third non-finite point of the last 20
    assert incident.state == "firing"


def test_a_non_finite_weight_pages_at_its_first_point_on_its_component(sender, project):
    starter(project)
    job = Job()
    job.override("weight_norm", lambda s, v: float("nan") if s == 400 else v, component="block.0")
    job.send(sender, "nan-weight", 0, 500, phases=WARMUP)
    [alert] = alerts("nan-weight")
    assert (alert.rule.name, alert.component, alert.first_step, alert.fired_step) == ("nonfinite-weights", "block.0", 400, 400)
