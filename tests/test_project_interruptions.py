"""A project's interruptions by cause, and its patterns across runs: stopping too late, several variables
changed at once, and incidents handled by an automatic response versus a human decision."""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.models import Incident
from ingest.models import Run
from reviews.models import LogEntry, Review
from reviews.patterns import STOPPED_LATE_STEPS, incident_handling, interruptions, several_variables_changed, stopped_too_late
from tests.alertmanager_support import am_alert, notification
from tests.factories import OWNER, client_for, make_alert, make_rule

pytestmark = pytest.mark.django_db


def send(sender, run_id, steps, *, restart=False, nan_at=None):
    steps = list(steps)
    body = {"run": {"id": run_id}, "points": [{"step": s, "metric": "loss", "value": "NaN" if s == nan_at else 2.0} for s in steps]}
    if restart:
        body["phases"] = [{"step": steps[0], "phase": "restart"}]
    assert sender.post(body).status_code == 202


def entry(run, decision, step, at=None, **fields):
    return LogEntry.objects.create(project=run.project, run=run, decision=decision, observation=f"{decision} at {step}",
                                   explanations=["why"], owner=OWNER, at=at or timezone.now(), step=step,
                                   artifacts_preserved=decision == "terminate", **fields)


@pytest.fixture
def five_interruptions(sender, webhook, project):
    make_rule(project, "loss-nonfinite", kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3})
    send(sender, "hw", range(0, 51))
    starts = timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    assert webhook.post(notification(am_alert(starts=starts, alertname="NodeDown", run="hw", instance="node7", step="50"))).status_code == 202
    send(sender, "hw", range(45, 60), restart=True)
    send(sender, "nan", range(0, 51), nan_at=49)
    send(sender, "nan", range(40, 60), restart=True)
    send(sender, "twice", range(0, 51))
    send(sender, "twice", range(51, 70), restart=True)
    send(sender, "twice", range(60, 80), restart=True)
    send(sender, "planned", range(0, 51))
    entry(Run.objects.get(run_id="planned"), "terminate", 50)
    send(sender, "planned", range(51, 60), restart=True)


def test_interruptions_are_counted_by_cause_with_their_share(five_interruptions, project):
    result = interruptions(project)
    assert result["total"] == 5
    assert result["table"] == [
        {"cause": "unknown", "count": 2, "share": 0.4, "runs": 1},
        {"cause": "planned/manual", "count": 1, "share": 0.2, "runs": 1},
        {"cause": "hardware", "count": 1, "share": 0.2, "runs": 1},
        {"cause": "numeric alert", "count": 1, "share": 0.2, "runs": 1},
    ]
    assert {(i["run"], i["cause"]) for i in result["interruptions"]} == {
        ("hw", "hardware"), ("nan", "numeric alert"), ("twice", "unknown"), ("planned", "planned/manual")}


def test_the_interruptions_page_shows_the_table_to_the_project_only(five_interruptions, project, teammate, outsider):
    response = client_for(teammate).get(f"/projects/{project.slug}/interruptions/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<tr data-cause="unknown"><td>unknown</td><td class="num">2</td><td class="num">40.0%</td>' in html
    assert '<tr data-cause="hardware"><td>hardware</td><td class="num">1</td><td class="num">20.0%</td>' in html
    assert client_for(outsider).get(f"/projects/{project.slug}/interruptions/").status_code == 404


def test_a_run_terminated_long_after_its_first_unresolved_alert_stopped_too_late(project):
    rule = make_rule(project)
    late = Run.objects.create(project=project, run_id="late")
    make_alert(rule, late, first_step=100)  # fires at step 101, never resolved
    make_alert(rule, late, component="layers.9", first_step=900)
    entry(late, "terminate", 101 + STOPPED_LATE_STEPS + 1, at=timezone.now() + timedelta(minutes=5))
    prompt = Run.objects.create(project=project, run_id="prompt")
    make_alert(rule, prompt, first_step=100)
    entry(prompt, "terminate", 101 + STOPPED_LATE_STEPS, at=timezone.now() + timedelta(minutes=5))
    cleared = Run.objects.create(project=project, run_id="cleared")
    make_alert(rule, cleared, first_step=100, state="resolved")
    entry(cleared, "terminate", 5000, at=timezone.now() + timedelta(minutes=5))
    continued = Run.objects.create(project=project, run_id="continued")
    make_alert(rule, continued, first_step=100)
    entry(continued, "continue", 5000, at=timezone.now() + timedelta(minutes=5))
    found = stopped_too_late(project)
    assert [(f["run"], f["alert_step"], f["steps_late"]) for f in found] == [("late", 101, STOPPED_LATE_STEPS + 1)]


def test_runs_compared_after_changing_several_variables_at_once(project):
    Run.objects.create(project=project, run_id="ref", reference=True, config={"lr": 3e-4, "batch_size": 512, "opt": {"beta2": 0.95}})
    Run.objects.create(project=project, run_id="one-change", config={"lr": 1e-4, "batch_size": 512, "opt": {"beta2": 0.95}})
    Run.objects.create(project=project, run_id="three-changes", config={"lr": 1e-4, "batch_size": 1024, "opt": {"beta2": 0.99}})
    found = several_variables_changed(project)
    assert [(f["run"], f["reference"], f["keys"]) for f in found] == [("three-changes", "ref", ["batch_size", "lr", "opt.beta2"])]
    assert [(d["key"], d["change"]) for d in found[0]["diff"]] == [("batch_size", "changed"), ("lr", "changed"), ("opt.beta2", "changed")]


def test_incidents_handled_automatically_or_by_a_human_decision(project):
    project.read_only = False
    project.save()
    stop_rule = make_rule(project, "grad-nonfinite", kind="nonfinite", response="stop")
    notify_rule = make_rule(project, "loss-spike")
    run = Run.objects.create(project=project, run_id="r")
    incidents = {}
    for name, rule, step in (("auto", stop_rule, 10), ("logged", notify_rule, 100), ("reviewed", notify_rule, 200),
                             ("both", stop_rule, 300), ("nobody", notify_rule, 400)):
        alert = make_alert(rule, run, component=f"c.{name}", first_step=step)
        incidents[name] = Incident.objects.create(run=run, origin=alert, first_step=step, severity=rule.permitted_response, opened_at=timezone.now())
        alert.incident = incidents[name]
        alert.save()
    entry(run, "intervene", 150, links={"incidents": [incidents["logged"].pk]})
    entry(run, "continue", 350, links={"incidents": [incidents["both"].pk]})
    review = Review.objects.create(run=run, trigger="alert", incident=incidents["reviewed"], opened_at=timezone.now())
    entry(run, "continue", 250, review=review)
    Review.objects.create(run=run, trigger="alert", incident=incidents["nobody"], opened_at=timezone.now())  # never decided
    result = incident_handling(project)
    assert {i["id"]: i["handling"] for i in result["incidents"]} == {
        incidents["auto"].pk: "automatic response", incidents["logged"].pk: "human decision",
        incidents["reviewed"].pk: "human decision", incidents["both"].pk: "both", incidents["nobody"].pk: "neither"}
    assert result["table"] == [{"handling": "automatic response", "count": 1, "share": 0.2},
                               {"handling": "human decision", "count": 2, "share": 0.4},
                               {"handling": "both", "count": 1, "share": 0.2},
                               {"handling": "neither", "count": 1, "share": 0.2}]
    project.read_only = True  # read-only: the job was never told, so nothing was handled automatically
    project.save()
    assert {i["handling"] for i in incident_handling(project)["incidents"] if i["id"] in (incidents["auto"].pk, incidents["both"].pk)} == {"neither", "human decision"}
