"""A backtest predicts its false-alarm rate from the verdicts on stored alerts its would-be alerts overlap."""
import pytest

from alerts.backtest import backtest, wilson
from ingest.models import Run
from tests.factories import make_alert, make_rule
from tests.backtest_support import backtested, draft
from tests.backtest_support import loss_curve, send_in_batches

pytestmark = pytest.mark.django_db


def test_verdicts_on_overlapping_alerts_of_any_rule_give_the_rate_with_its_count_and_interval(owner, project, runs):
    other = make_rule(project, name="loss-high", kind="threshold", scope={"metrics": ["loss"]})
    spiky_a, spiky_b, calm = (Run.objects.get(run_id=r) for r in ("spiky-a", "spiky-b", "calm"))
    # Overlapping the would-be alert on spiky-a (steps 300..): one judged false, one actionable, one not judged.
    make_alert(other, run=spiky_a, component="", metric="loss", first_step=299, verdict="false_alarm", state="resolved")
    make_alert(other, run=spiky_a, component="", metric="loss", first_step=303, verdict="actionable", state="resolved")
    make_alert(other, run=spiky_a, component="", metric="loss", first_step=301, state="resolved")
    make_alert(other, run=spiky_b, component="", metric="loss", first_step=199, verdict="false_alarm", state="resolved")
    # Not overlapping: earlier steps, another component, a run with no would-be alert.
    make_alert(other, run=spiky_a, component="", metric="loss", first_step=100, verdict="false_alarm", state="resolved")
    make_alert(other, run=spiky_b, component="layers.3", metric="loss", first_step=200, verdict="actionable", state="resolved")
    make_alert(other, run=calm, component="", metric="loss", first_step=300, verdict="actionable", state="resolved")

    prediction = backtested(owner, draft())["false_alarms"]

    assert (prediction["verdicts"], prediction["false_alarm"], prediction["actionable"]) == (3, 2, 1)
    assert prediction["rate"] == pytest.approx(2 / 3)
    low, high = prediction["interval"]
    assert low < 2 / 3 < high and 0 < low and high < 1
    assert prediction["prediction"] == "2/3 overlapping verdicts false"


def test_without_overlapping_verdicts_there_is_no_prediction(owner, project, runs):
    other = make_rule(project, name="loss-high", kind="threshold", scope={"metrics": ["loss"]})
    make_alert(other, run=Run.objects.get(run_id="spiky-a"), component="", metric="loss", first_step=10, verdict="false_alarm", state="resolved")
    prediction = backtested(owner, draft())["false_alarms"]
    assert (prediction["verdicts"], prediction["rate"], prediction["interval"], prediction["prediction"]) == (0, None, None, "no prediction")


def test_a_stored_alert_overlapping_two_would_be_alerts_counts_once(project, sender):
    loss = loss_curve(600)
    loss[300:306] *= 1.8
    loss[340:346] *= 1.8  # with resolve_points 2 the first ends in between: two alerts
    send_in_batches(sender, "twice", {("loss", ""): loss}, size=100)
    rule = make_rule(project, kind="band", persistence={"points": 3, "resolve_points": 2})
    result = backtest(rule, Run.objects.filter(run_id="twice"))
    assert [a["first_step"] for a in result["would_fire"]] == [300, 340]
    wide = make_alert(rule, run=Run.objects.get(run_id="twice"), component="", metric="loss", first_step=290, verdict="false_alarm", state="resolved")
    wide.last_step = 400
    wide.save()
    assert backtest(rule, Run.objects.filter(run_id="twice"))["false_alarms"]["verdicts"] == 1


def test_the_wilson_interval_matches_the_textbook_values():
    # Wilson (1927), 95%: 1 of 2 gives [0.0945, 0.9055]; 0 of 10 gives [0, 0.2775].
    assert wilson(1, 2) == pytest.approx((0.0945, 0.9055), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(0, 0) is None
