"""A change of what the run computes, announced by the job (a new `config` on its run line), starts the
baselines again, visibly; the same change unannounced is a slowdown the console pages about."""
import numpy as np
import pytest

from ingest.models import IdentityChange
from ingest.phases import PhaseIndex
from ingest.models import Run
from tests.engine_support import Job, alerts, starter

pytestmark = pytest.mark.django_db
WARMUP = [{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}]


def doubled_batch(job):
    job.override("step_time", lambda s, v: v * 2 if s >= 400 else v)


def test_a_batch_size_change_announced_with_a_new_config_is_a_new_baseline_not_a_page(sender, project):
    starter(project)
    job = Job()
    doubled_batch(job)
    job.send(sender, "announced", 0, 400, phases=WARMUP, run={"config": {"batch_size": 64}})
    job.send(sender, "announced", 400, 800, run={"config": {"batch_size": 128}})
    assert [(a.rule.name, a.first_step) for a in alerts("announced")] == []
    [change] = IdentityChange.objects.filter(run__run_id="announced", field="config")
    assert change.step == 400
    kinds, _, span_start, reset = PhaseIndex(Run.objects.get(run_id="announced")).of(np.array([399, 400, 409, 410]))
    assert list(kinds) == ["steady", "reconfigured", "reconfigured", "steady"]
    assert list(reset) == [-1, 400, 400, 400]


def test_a_change_announced_at_an_evaluation_step_starts_the_baseline_all_the_same(sender, project):
    starter(project)
    job = Job()
    doubled_batch(job)
    phases = [*WARMUP, {"step": 400, "phase": "eval"}, {"step": 401, "phase": "steady"}]
    job.send(sender, "at-eval", 0, 400, phases=phases, run={"config": {"batch_size": 64}})
    job.send(sender, "at-eval", 400, 800, phases=phases, run={"config": {"batch_size": 128}})
    assert [(a.rule.name, a.first_step) for a in alerts("at-eval")] == []


def test_the_same_change_unannounced_is_a_slowdown(sender, project):
    starter(project)
    job = Job()
    doubled_batch(job)
    job.send(sender, "unannounced", 0, 800, phases=WARMUP, run={"config": {"batch_size": 64}})
    [alert] = alerts("unannounced", "slow-steps")
    assert alert.first_step == 400 and alert.state == "firing"
