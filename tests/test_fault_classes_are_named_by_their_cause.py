"""Fault classes of issue 20, each on the synthetic job, under the whole starter pack: each is alerted, on the
component (or run) a reviewer acts on, and its benign look-alike is not."""
import numpy as np
import pytest

from tests.engine_support import Job, alerts, incidents, rule_names, starter

pytestmark = pytest.mark.django_db
WARMUP = [{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}]


def test_an_optimizer_surge_on_one_component_is_named_on_it_while_its_gradient_stays_normal(sender, project):
    starter(project)
    job = Job()
    job.override("update_ratio", lambda s, v: v * 100 if 400 <= s < 403 else v, component="block.1")
    job.send(sender, "surge", 0, 600, phases=WARMUP)
    [incident] = incidents("surge")
    assert (incident.origin.rule.name, incident.origin.component, incident.first_step) == ("update-surge", "block.1", 400)


def test_a_warm_restart_of_the_learning_rate_moves_every_update_and_is_not_a_surge(sender, project):
    starter(project)
    job = Job()
    # SGDR: the learning rate falls ×20 over 150 steps, then jumps back; the updates follow it.
    job.override("lr", lambda s, v: v * (0.05 + 0.95 * (1 + np.cos(np.pi * ((s - 50) % 150) / 150)) / 2) if s >= 50 else v)
    job.send(sender, "sgdr", 0, 800, phases=WARMUP)
    assert rule_names("sgdr") == []


def test_a_gradient_ramp_the_band_would_follow_is_held_against_where_it_stood(sender, project):
    starter(project)
    job = Job()
    job.override("grad_norm", lambda s, v: v * min(8.0, 1.043 ** max(0, s - 400)), component="block.0")
    job.send(sender, "ramp", 0, 700, phases=WARMUP)
    [alert] = alerts("ramp", "gradient-explosion")
    assert alert.component == "block.0" and 400 < alert.fired_step <= 460
    assert alert.state != "resolved"  # ×8 for good: it stays open


def test_a_compounding_slowdown_is_alerted_and_stays_open(sender, project):
    starter(project)
    job = Job()
    job.override("step_time", lambda s, v: v * 1.0047 ** max(0, s - 300))  # ×2 in 150 steps, ×6.5 by 700
    job.send(sender, "drift", 0, 700, phases=WARMUP)
    [alert] = alerts("drift", "slow-steps")
    assert 300 < alert.fired_step <= 420 and alert.state != "resolved" and alert.last_step == 699


def test_a_gradient_collapsing_by_orders_of_magnitude_is_a_vanishing_gradient_not_an_explosion(sender, project):
    starter(project)
    job = Job()
    job.override("grad_norm", lambda s, v: v * 1e-4 if s >= 400 else v, component="block.1")
    job.send(sender, "collapse", 0, 600, phases=WARMUP)
    assert rule_names("collapse") == ["vanishing-gradient"]
    [alert] = alerts("collapse")
    assert (alert.component, alert.first_step, alert.state) == ("block.1", 400, "firing")


def test_one_component_that_stops_reporting_while_the_run_goes_on_is_alerted_and_clears_when_it_is_back(sender, project):
    starter(project)
    job = Job()
    job.override("grad_norm", lambda s, v: None if 400 <= s < 700 else v, component="head")
    job.override("weight_norm", lambda s, v: None if 400 <= s < 700 else v, component="head")
    job.override("update_ratio", lambda s, v: None if 400 <= s < 700 else v, component="head")
    job.send(sender, "silent", 0, 600, batch=50, phases=WARMUP)
    [alert] = alerts("silent", "component-silent")
    assert (alert.component, alert.first_step, alert.state) == ("head", 400, "firing")
    assert rule_names("silent") == ["component-silent"]
    job.send(sender, "silent", 600, 800, batch=50)
    alert.refresh_from_db()
    assert alert.state == "resolved"


def test_a_component_sent_every_tenth_step_is_not_silent(sender, project):
    starter(project)
    job = Job()
    for metric in ("grad_norm", "weight_norm", "update_ratio"):
        job.override(metric, lambda s, v: v if s % 10 == 0 else None, component="embed")
    job.send(sender, "sparse", 0, 800, batch=25, phases=WARMUP)
    assert alerts("sparse", "component-silent") == []


def test_a_learning_rate_collapse_is_named_by_the_learning_rate_not_the_components_it_froze(sender, project):
    starter(project)
    job = Job()
    job.override("lr", lambda s, v: 0.0 if s >= 400 else v)
    job.send(sender, "lr-zero", 0, 600, phases=WARMUP)
    [incident] = incidents("lr-zero")
    assert (incident.origin.rule.name, incident.origin.metric, incident.origin.component) == ("lr-collapse", "lr", "")
    assert {"frozen-component", "lr-collapse"} <= set(rule_names("lr-zero"))


def test_a_schedule_that_decays_to_zero_at_its_end_is_not_a_collapse(sender, project):
    starter(project)
    job = Job()
    job.override("lr", lambda s, v: v * max(0.0, 1 - s / 700))  # 0 from step 700 on, as runs past the schedule send
    job.send(sender, "to-zero", 0, 800, phases=WARMUP)
    assert alerts("to-zero", "lr-collapse") == []


def test_a_step_decay_of_the_learning_rate_is_not_a_collapse(sender, project):
    starter(project)
    job = Job()
    job.override("lr", lambda s, v: v * (0.1 if s >= 300 else 1) * (0.1 if s >= 500 else 1))
    job.send(sender, "steps", 0, 700, phases=WARMUP)
    assert alerts("steps", "lr-collapse") == []


def test_an_abrupt_fall_of_the_loss_below_its_trend_is_alerted(sender, project):
    starter(project)
    job = Job()
    job.override("loss", lambda s, v: v if s < 400 else 0.15 + (v - 0.15) * np.exp(-(s - 400) / 15))
    job.send(sender, "plunge", 0, 600, phases=WARMUP)
    [alert] = alerts("plunge", "loss-under-trend")
    assert 400 < alert.fired_step <= 440 and alert.state == "firing"


def test_an_optimizer_surge_is_judged_per_learning_rate_logged_less_often_than_the_health(sender, project):
    starter(project)
    job = Job()
    job.lr_every = 25  # the trainer logs its learning rate every 25 steps, the health every step
    job.override("update_ratio", lambda s, v: v * 100 if 400 <= s < 403 else v, component="head")
    job.send(sender, "sparse-lr", 0, 600, phases=WARMUP)
    [incident] = incidents("sparse-lr")
    assert (incident.origin.rule.name, incident.origin.component, incident.first_step) == ("update-surge", "head", 400)


def test_a_gradient_that_goes_to_exactly_zero_is_lost_not_exploding(sender, project):
    starter(project)
    job = Job()
    job.override("grad_norm", lambda s, v: 0.0 if s >= 400 else v, component="block.0")
    job.send(sender, "zero", 0, 700, phases=WARMUP)
    assert "gradient-explosion" not in rule_names("zero")
    assert {"lost-gradient", "vanishing-gradient"} <= set(rule_names("zero"))


def test_an_optimizer_surge_waits_for_a_person_after_the_updates_are_normal_again(sender, project, owner):
    from alerts.review import runs_needing_review
    from alerts.triage import acknowledge
    from ingest.models import Run

    starter(project)
    job = Job()
    job.override("update_ratio", lambda s, v: v * 100 if 400 <= s < 403 else v, component="block.1")
    job.send(sender, "surge-review", 0, 700, phases=WARMUP)
    [alert] = alerts("surge-review", "update-surge")
    [incident] = incidents("surge-review")
    assert alert.state == "resolved" and incident.state == "needs_review"  # the weights it moved stay moved
    run = Run.objects.get(run_id="surge-review")
    assert runs_needing_review([run.pk]) == {run.pk}
    acknowledge(alert, owner)
    incident.refresh_from_db()
    assert incident.state == "resolved" and runs_needing_review([run.pk]) == set()
