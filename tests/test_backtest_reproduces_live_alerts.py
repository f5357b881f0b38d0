"""A backtest is the live engine run again: over the runs a saved rule judged, it fires the same alerts step for step."""
import numpy as np
import pytest

from alerts.backtest import backtest
from alerts.models import Alert, AlertChange, BandSample, RuleProgress
from ingest.models import Run
from tests.backtest_support import loss_curve, send_in_batches
from tests.factories import make_rule

pytestmark = pytest.mark.django_db


def live(rule):
    return sorted(
        (a.run.run_id, a.component, a.metric, a.first_step, a.fired_step, a.last_step, a.magnitude, a.magnitude_unit)
        for a in Alert.objects.filter(rule=rule).select_related("run")
    )


def replayed(result):
    return sorted(
        (a["run"], a["component"], a["metric"], a["first_step"], a["fired_step"], a["last_step"], a["magnitude"], a["unit"])
        for a in result["would_fire"]
    )


def stored_rows():
    return [m.objects.count() for m in (Alert, AlertChange, RuleProgress, BandSample)]


def test_a_band_rule_backtested_over_its_runs_fires_what_it_fired_live(sender, project):
    rule = make_rule(project, kind="band")
    for seed, spikes in enumerate([(300, 306), (120, 126), None]):
        loss = loss_curve(500, seed)
        if spikes:
            loss[spikes[0]:spikes[1]] *= 1.8
        send_in_batches(sender, f"band-{seed}", {("loss", ""): loss}, size=37 + 10 * seed)
    fired = live(rule)
    assert [(a[0], a[3]) for a in fired] == [("band-0", 300), ("band-1", 120)]
    before = stored_rows()

    result = backtest(rule, Run.objects.filter(project=project))

    assert replayed(result) == fired
    assert (result["runs"], result["runs_with_alerts"], result["alerts"], result["pages"]) == (3, 2, 2, 2)
    assert stored_rows() == before  # nothing written: no alert, change, progress or band sample


def test_nonfinite_and_threshold_rules_over_several_components_fire_what_they_fired_live(sender, project):
    nonfinite = make_rule(project, kind="nonfinite", scope={"metrics": ["grad_norm"], "component": "layers.*"},
                          persistence={"points": 2, "resolve_points": 3})
    threshold = make_rule(project, kind="threshold", scope={"metrics": ["grad_norm"], "component": "layers.*"},
                          persistence={"points": 3, "resolve_points": 5}, params={"above": 10.0, "settle_steps": 0})
    rng = np.random.default_rng(7)
    series = {}
    for layer in range(3):
        grad = rng.uniform(1, 2, 300)
        series[("grad_norm", f"layers.{layer}")] = grad
    series[("grad_norm", "layers.1")][100:110] = np.nan
    series[("grad_norm", "layers.1")][200:204] = 50.0
    series[("grad_norm", "layers.2")][150:170] = np.r_[np.full(10, 20.0), np.full(10, 1.0)] * 1.0
    series[("grad_norm", "layers.2")][250:260] = np.inf
    send_in_batches(sender, "grads", series, size=45)
    expected = {nonfinite: [("layers.1", 100), ("layers.2", 250)],
                threshold: [("layers.1", 200), ("layers.2", 150), ("layers.2", 250)]}  # +inf is above 10 too
    for rule, first_steps in expected.items():
        fired = live(rule)
        assert [(a[1], a[3]) for a in fired] == first_steps
        assert replayed(backtest(rule, Run.objects.filter(run_id="grads"))) == fired


def test_a_divergence_rule_fires_what_it_fired_live(sender, project):
    rule = make_rule(project, name="val-divergence", kind="divergence", scope={"metrics": ["val_loss"], "component": ""},
                     persistence={"points": 1, "resolve_points": 2}, params={"training": "loss", "evaluations": 3})
    n = 600
    train = 3.0 * np.exp(-np.arange(n) / 200) + 1.0
    val = np.full(n, np.nan)
    evals = np.arange(0, n, 50)
    val[evals] = np.r_[np.linspace(3.0, 1.5, 6), 1.6, 1.75, 1.9, 2.1, 2.3, 2.5]
    for start in range(0, n, 40):
        points = [{"step": s, "metric": "loss", "value": float(train[s])} for s in range(start, start + 40)]
        points += [{"step": int(s), "metric": "val_loss", "value": float(val[s])} for s in evals if start <= s < start + 40]
        assert sender.post({"run": {"id": "overfit", "tags": {"team": "pretrain"}}, "points": points}).status_code == 202
    fired = live(rule)
    assert [a[:4] for a in fired] == [("overfit", "", "val_loss", 400)]
    assert replayed(backtest(rule, Run.objects.filter(run_id="overfit"))) == fired
