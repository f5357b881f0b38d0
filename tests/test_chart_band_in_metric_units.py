"""A ratio band is drawn in the metric's own units, and it is the band the rule judged with."""
import numpy as np
import pytest

from alerts.models import Alert, BandSample, Rule
from alerts.rules import save_rule
from ingest.models import Series

pytestmark = pytest.mark.django_db
OWNER = "Pretrain on-call <#pretrain-oncall>"


def ratio_rule(project):
    return save_rule(
        Rule(project=project, name="throughput-ratio", kind="band", owner=OWNER, scope={"metrics": ["throughput"]},
             persistence={"points": 3}, diagnostic_url="https://runbooks.example/t", permitted_response="observe",
             params={"direction": "below", "scale": "ratio", "max_ratio": 2.0, "rel_floor": 0.07}),
        source="test",
    )


def test_the_chart_draws_the_ratio_band_the_rule_judged_in_samples_per_second(sender, project, api, owner):
    from alerts.evaluation import chart_band

    rule = ratio_rule(project)
    rng = np.random.default_rng(31)
    level = rng.uniform(500, 5000)
    values = level * (1 + rng.uniform(-0.5, 0.5, 1200))
    drop = int(rng.integers(700, 1000))
    values[drop:drop + 20] /= 10
    points = [{"step": i, "metric": "throughput", "value": float(v)} for i, v in enumerate(values)]
    for lo in range(0, 1200, 300):
        assert sender.post({"run": {"id": "drawn"}, "points": points[lo:lo + 300]}).status_code == 202
    [alert] = Alert.objects.all()
    assert alert.first_step == drop
    series = Series.objects.get(metric="throughput")
    steps, centre, lower, upper = chart_band(series, rule)
    judged = np.isfinite(centre)
    # In samples/s: around the level, lower edge positive and above half of it at most twice below the centre.
    assert np.all(lower[judged] > 0)
    assert np.median(centre[judged]) == pytest.approx(level, rel=0.15)
    assert np.all(lower[judged] >= centre[judged] / 2 * (1 - 1e-9))
    # The dropped points are below the drawn band, as the rule held them.
    assert (values[steps[(steps >= drop) & (steps < drop + 20)]] < lower[(steps >= drop) & (steps < drop + 20)]).all()
    # The band stored while judging (wide charts) is the replayed one, and the API serves it in the same units.
    for sample in BandSample.objects.filter(rule=rule, series=series):
        i = int(np.searchsorted(steps, sample.step))
        assert (sample.centre, sample.lower, sample.upper) == pytest.approx((centre[i], lower[i], upper[i]))
    api.force_authenticate(owner)
    body = api.get("/api/v1/runs/drawn/series/", {"metric": "throughput", "band": 1, "start": 600, "end": 900}).json()
    assert body["band"]["rule"] == "throughput-ratio"
    drawn = {s: (lo, up) for s, lo, up in zip(body["band"]["step"], body["band"]["lower"], body["band"]["upper"]) if lo is not None}
    assert drawn
    for step, (lo, up) in drawn.items():
        i = int(np.searchsorted(steps, step))
        assert (lo, up) == pytest.approx((lower[i], upper[i]))
