"""Absence rules: gaps in the steps, gaps in the points' own times, and runs that go silent by the wall clock."""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.models import Rule
from alerts.rules import save_rule
from alerts.tasks import sweep_unevaluated
from ingest.models import Run

pytestmark = pytest.mark.django_db
OWNER = "Pretrain on-call <#pretrain-oncall>"


def make_rule(project, params, persistence=None, name="loss-missing"):
    return save_rule(
        Rule(project=project, name=name, kind="absence", owner=OWNER, scope={"metrics": ["loss"], "component": ""},
             persistence=persistence or {"points": 1}, diagnostic_url=f"https://runbooks.example/{name}",
             permitted_response="notify", params=params),
        source="test",
    )


def loss(steps, time=None):
    """Loss points; with `time`, a function of the step giving the point's own Unix time."""
    return [{"step": s, "metric": "loss", "value": 3.0 - 0.001 * s, **({"time": time(s)} if time else {})} for s in steps]


def alerts_of(sender, run_id):
    return sender.get("/api/v1/alerts/", run=run_id).json()["results"]


def summary(alert):
    return (alert["metric"], alert["condition"], alert["step"], alert["fired_step"], alert["magnitude"], alert["magnitude_unit"])


# Steps


def test_six_missing_steps_fire_one_alert_naming_the_gap(sender, project):
    make_rule(project, {"missing_steps": 5})
    sender.post({"run": {"id": "gap6"}, "points": loss(range(0, 50))})
    sender.post({"run": {"id": "gap6"}, "points": loss(range(56, 61))})  # steps 50..55 never arrived
    [alert] = alerts_of(sender, "gap6")
    assert summary(alert) == ("loss", None, 56, 56, 6.0, "missing steps")


def test_a_gap_inside_one_batch_counts_the_same(sender, project):
    make_rule(project, {"missing_steps": 5})
    sender.post({"run": {"id": "gap6-one"}, "points": loss([*range(0, 50), *range(56, 61)])})
    [alert] = alerts_of(sender, "gap6-one")
    assert summary(alert) == ("loss", None, 56, 56, 6.0, "missing steps")


def test_five_missing_steps_are_within_the_limit(sender, project):
    make_rule(project, {"missing_steps": 5})
    sender.post({"run": {"id": "gap5"}, "points": loss(range(0, 50))})
    sender.post({"run": {"id": "gap5"}, "points": loss(range(55, 61))})  # steps 50..54 missing: exactly 5
    assert alerts_of(sender, "gap5") == []


@pytest.mark.parametrize("with_restart_phase", [False, True], ids=["rewind", "restart-phase"])
def test_a_restart_that_re_sends_earlier_steps_is_not_a_gap(sender, project, with_restart_phase):
    make_rule(project, {"missing_steps": 5})
    sender.post({"run": {"id": "restarted"}, "points": loss(range(0, 50))})
    # The job died and resumed from its checkpoint at step 40: it sends 40..60 again.
    phases = [{"step": 40, "phase": "restart"}] if with_restart_phase else []
    sender.post({"run": {"id": "restarted"}, "phases": phases, "points": loss(range(40, 61))})
    assert sender.get("/api/v1/runs/restarted/").json()["last_step"] == 60
    assert alerts_of(sender, "restarted") == []


# The points' own times


def test_points_whose_own_times_jump_by_two_minutes_fire(sender, project):
    make_rule(project, {"seconds": 60})
    t0 = 1_764_400_000.0
    # One point a second, then the job's clock shows a 120 s hole between step 19 and step 20.
    sender.post({"run": {"id": "stalled"}, "points": loss(range(0, 20), time=lambda s: t0 + s)})
    sender.post({"run": {"id": "stalled"}, "points": loss(range(20, 30), time=lambda s: t0 + 19 + 120 + (s - 20))})
    [alert] = alerts_of(sender, "stalled")
    assert summary(alert) == ("loss", None, 20, 20, 120.0, "seconds without data")


def test_points_a_second_apart_do_not_fire(sender, project):
    make_rule(project, {"seconds": 60})
    t0 = 1_764_400_000.0
    sender.post({"run": {"id": "steady"}, "points": loss(range(0, 20), time=lambda s: t0 + s)})
    sender.post({"run": {"id": "steady"}, "points": loss(range(20, 30), time=lambda s: t0 + s)})
    assert alerts_of(sender, "steady") == []


def test_a_rule_with_both_limits_names_the_unit_of_the_one_crossed(sender, project):
    # The starter pack's missing-data rule has both limits: a time gap with no missing step is in seconds.
    make_rule(project, {"missing_steps": 5, "seconds": 60})
    t0 = 1_764_400_000.0
    sender.post({"run": {"id": "both"}, "points": loss(range(0, 20), time=lambda s: t0 + s)})
    sender.post({"run": {"id": "both"}, "points": loss(range(20, 30), time=lambda s: t0 + 19 + 120 + (s - 20))})
    [alert] = alerts_of(sender, "both")
    assert (alert["step"], alert["magnitude"], alert["magnitude_unit"]) == (20, 120.0, "seconds without data")


# The wall clock (the periodic sweep)


def go_quiet(run_id, seconds):
    """As if the run's last batch arrived `seconds` ago."""
    Run.objects.filter(run_id=run_id).update(last_seen_at=timezone.now() - timedelta(seconds=seconds))


def test_a_silent_run_gets_exactly_one_alert_and_its_next_batch_resolves_it(sender, project):
    make_rule(project, {"seconds": 60})
    sender.post({"run": {"id": "hung"}, "points": loss(range(0, 20))})
    sweep_unevaluated()
    assert alerts_of(sender, "hung") == []  # it has only just sent

    go_quiet("hung", 120)
    sweep_unevaluated()
    sweep_unevaluated()  # a second sweep during the same silence adds nothing
    [alert] = alerts_of(sender, "hung")
    assert (alert["condition"], alert["state"], alert["magnitude_unit"], alert["step"]) == ("silent", "firing", "seconds without data", 19)
    assert alert["magnitude"] == pytest.approx(120, abs=5)
    assert Run.objects.get(run_id="hung").status == "alerting"

    sender.post({"run": {"id": "hung"}, "points": loss(range(20, 30))})
    [alert] = alerts_of(sender, "hung")
    assert (alert["condition"], alert["state"]) == ("silent", "resolved")
    assert Run.objects.get(run_id="hung").status == "healthy"


def test_a_silence_already_alerted_is_not_alerted_again_when_the_data_returns(sender, project):
    # The job stamps its own points; it hangs for two minutes, the sweep says so, then it resumes.
    make_rule(project, {"seconds": 60}, persistence={"points": 1, "resolve_points": 10})
    now = timezone.now().timestamp()
    sender.post({"run": {"id": "resumed"}, "points": loss(range(0, 20), time=lambda s: now - 140 + s)})
    go_quiet("resumed", 121)
    sweep_unevaluated()
    sender.post({"run": {"id": "resumed"}, "points": loss(range(20, 30), time=lambda s: now + (s - 20) * 0.01)})
    alerts = alerts_of(sender, "resumed")
    assert [(a["condition"], a["state"]) for a in alerts] == [("silent", "resolved")]
    assert Run.objects.get(run_id="resumed").status == "healthy"


def test_a_finished_run_is_not_silent(sender, project):
    make_rule(project, {"seconds": 60})
    sender.post({"run": {"id": "done", "budget": {"steps": 50}}, "points": loss(range(0, 51))})
    assert Run.objects.get(run_id="done").status == "finished"
    go_quiet("done", 3600)
    sweep_unevaluated()
    assert alerts_of(sender, "done") == []
    assert Run.objects.get(run_id="done").status == "finished"
