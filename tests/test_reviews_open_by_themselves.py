"""Reviews that open without anyone starting them: a `review` rule's alert, a schedule, a decision's next-review trigger.

Each opens once, however often its condition is seen again (a later batch, the periodic task running twice).
"""
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.models import Alert
from ingest.models import Run
from reviews.models import Review, ReviewSchedule
from reviews.tasks import open_due_reviews
from reviews.lifecycle import open_review, decide
from tests.factories import make_rule

pytestmark = pytest.mark.django_db


def send(sender, run_id, steps, value=lambda s: 3.0 - s / 1000):
    points = [{"step": s, "metric": "loss", "value": value(s)} for s in steps]
    assert sender.post({"run": {"id": run_id}, "points": points}).status_code == 202
    return Run.objects.get(run_id=run_id)


def nan_at(bad):
    return lambda s: "NaN" if s in bad else 3.0


def test_an_alert_of_a_review_rule_opens_one_review_linking_it_and_its_incident(sender, project):
    make_rule(project, kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3},
              response="review")
    run = send(sender, "r-alert", range(0, 20), nan_at({12, 13, 14}))
    [review] = Review.objects.filter(run=run)
    assert review.trigger == "alert" and review.alert.rule.name == "grad-nonfinite"
    assert review.incident_id == review.alert.incident_id is not None
    assert review.steps.filter(filled_at__isnull=False).count() == 5  # filled once the evaluation committed
    send(sender, "r-alert", range(20, 40), nan_at({25}))  # the same incident goes on, or a new alert: never a second review of it
    assert Review.objects.filter(run=run, incident=review.incident).count() == 1


def test_alerts_of_rules_that_only_notify_open_no_review(sender, project):
    make_rule(project, kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3},
              response="notify")
    run = send(sender, "r-notify", range(0, 20), nan_at({12}))
    assert run.alerts.exists() and not Review.objects.filter(run=run).exists()


def test_a_schedule_every_n_steps_opens_one_review_per_due_step(sender, project, oncall):
    ReviewSchedule.objects.create(project=project, every_steps=100)
    run = send(sender, "r-sched", range(0, 90))
    assert not Review.objects.filter(run=run).exists()
    send(sender, "r-sched", range(90, 150))
    send(sender, "r-sched", range(150, 199))
    assert list(Review.objects.filter(run=run).values_list("trigger", "due_key")) == [("schedule", "steps:100")]
    decide(Review.objects.get(run=run), by=oncall, decision="continue", observation="fine", explanations=["on track"])
    send(sender, "r-sched", range(199, 230))
    assert sorted(Review.objects.filter(run=run).values_list("due_key", flat=True)) == ["steps:100", "steps:200"]


def test_a_runs_own_schedule_replaces_the_projects(sender, project):
    ReviewSchedule.objects.create(project=project, every_steps=100)
    run = send(sender, "r-own", range(0, 10))
    ReviewSchedule.objects.create(project=project, run=run, every_steps=1000)
    send(sender, "r-own", range(10, 120))
    assert not Review.objects.filter(run=run).exists()


def test_a_schedule_every_h_hours_opens_from_the_periodic_task_once(sender, project):
    run = send(sender, "r-hours", range(0, 10))
    ReviewSchedule.objects.create(project=project, every_hours=6)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=13))
    assert open_due_reviews() == 1
    assert open_due_reviews() == 0
    [review] = Review.objects.filter(run=run)
    assert review.due_key == "hours:12" and review.steps.filter(filled_at__isnull=False).count() == 5


def test_a_decisions_next_review_step_opens_the_next_review_when_the_run_reaches_it(sender, project, oncall):
    run = send(sender, "r-next", range(0, 100))
    first = open_review(run, "manual", by=oncall)
    entry = decide(first, by=oncall, decision="continue", observation="fine", explanations=["on track"],
                   next_review={"step": 150})
    send(sender, "r-next", range(100, 149))
    assert Review.objects.filter(run=run).count() == 1
    send(sender, "r-next", range(149, 170))
    second = Review.objects.filter(run=run).exclude(pk=first.pk).get()
    assert second.trigger == "next_review" and second.trigger_detail["entry"] == entry.pk and second.previous == first


def decided_with_next_review_rule(sender, project, oncall, run_id):
    """A run whose first review decided to look again at the next alert of grad-nonfinite: (run, that review)."""
    make_rule(project, kind="nonfinite", scope={"metrics": ["loss"]}, persistence={"points": 1, "resolve_points": 3})
    run = send(sender, run_id, range(0, 50))
    first = open_review(run, "manual", by=oncall)
    decide(first, by=oncall, decision="continue", observation="fine", explanations=["on track"],
           next_review={"rule": "grad-nonfinite"})
    return run, first


def test_a_decisions_next_review_rule_opens_at_that_rules_next_alert(sender, project, oncall):
    run, first = decided_with_next_review_rule(sender, project, oncall, "r-rule")
    send(sender, "r-rule", range(50, 80), nan_at({60}))
    second = Review.objects.filter(run=run).exclude(pk=first.pk).get()
    assert second.trigger == "next_review" and second.alert.rule.name == "grad-nonfinite" and second.alert.first_step == 60


def test_a_decisions_next_review_rule_opens_once_at_the_first_of_a_batchs_alerts_of_that_rule(sender, project, oncall):
    run, first = decided_with_next_review_rule(sender, project, oncall, "r-rules")
    send(sender, "r-rules", range(50, 100), nan_at({60, 70, 80}))  # three alerts of the rule, judged together
    assert Alert.objects.filter(run=run).count() == 3
    later = Review.objects.filter(run=run).exclude(pk=first.pk)
    assert [(r.trigger, r.alert.first_step) for r in later] == [("next_review", 60)]


def test_a_decisions_next_review_time_opens_from_the_periodic_task(sender, project, oncall):
    run = send(sender, "r-time", range(0, 20))
    first = open_review(run, "manual", by=oncall)
    decide(first, by=oncall, decision="continue", observation="fine", explanations=["on track"],
           next_review={"at": (timezone.now() + timedelta(hours=2)).isoformat()})
    assert open_due_reviews() == 0
    later = timezone.now() + timedelta(hours=3)
    from reviews.triggers import open_due_reviews as open_due

    assert open_due(now=later) == 1 and open_due(now=later) == 0
    assert Review.objects.filter(run=run, trigger="next_review").count() == 1
