"""alerts/bands.py: the band a chart draws and a band rule checks."""
import numpy as np
import pytest

from alerts.bands import BandParams, band_at, envelope, reference_band


def noisy(n, level=2.0, slope=0.0, sigma=0.02, seed=0):
    rng = np.random.default_rng(seed)
    return level + slope * np.arange(n) + rng.normal(0, sigma, n)


def test_the_next_point_of_a_noisy_trending_series_lies_inside_its_band():
    values = noisy(600, level=3.0, slope=-0.002)  # a falling loss: 1.2 over the stretch, noise 0.02
    band = band_at(values, np.arange(100, 600))
    inside = (values[100:] >= band.lower) & (values[100:] <= band.upper)
    assert inside.mean() == 1.0
    # The centre follows the trend instead of lagging half a window behind it.
    assert np.abs(band.centre - (3.0 - 0.002 * np.arange(100, 600))).max() < 0.03


def test_a_spike_is_outside_and_does_not_widen_the_band_after_it():
    values = noisy(300)
    values[200] = 5.0
    band = band_at(values, np.array([200, 201, 250]))
    assert values[200] > band.upper[0]
    # One outlier in the history leaves the robust spread as it was.
    assert abs(band.sigma[1] - band.sigma[0]) < 0.2 * band.sigma[0]


def test_a_flat_series_still_has_a_band_of_some_width():
    band = band_at(np.full(200, 0.001), [150])
    assert band.upper[0] > 0.001 > band.lower[0]


def test_too_little_history_gives_no_band():
    band = band_at(noisy(50), [5, 19, 20, 40], BandParams(min_history=20))
    assert np.isnan(band.centre[:2]).all() and np.isfinite(band.centre[2:]).all()


def test_reference_runs_give_a_band_where_the_run_has_no_history_and_widen_it_where_it_has():
    steps = np.arange(1000)
    reference = [(steps, noisy(1000, level=2.0, seed=s)) for s in (1, 2)]
    ref = reference_band(reference, np.array([10, 500]))
    assert np.isfinite(ref.centre).all() and abs(ref.centre[1] - 2.0) < 0.02
    own = band_at(noisy(300, level=2.5), [5, 200])
    both = envelope(own, ref)
    assert both.lower[0] == ref.lower[0]  # no own history yet: the reference alone
    assert both.lower[1] <= ref.lower[1] and both.upper[1] >= own.upper[1]


def test_the_chart_band_of_a_stored_series_is_the_band_the_rule_judged(sender, project):
    """Same judge, same history: where the rule held a point outside, the drawn band has it outside too."""
    from alerts.evaluation import chart_band
    from alerts.models import Alert, Rule
    from alerts.rules import save_rule
    from ingest.models import Series

    rule = save_rule(Rule(project=project, name="loss-band", kind="band", owner="Pretrain on-call <#pretrain-oncall>",
                          scope={"metrics": ["loss"]}, persistence={"points": 3}, diagnostic_url="https://runbooks.example/l",
                          permitted_response="observe", params={"direction": "above"}), source="test")
    values = noisy(400, level=3.0, slope=-0.002)
    values[250:] += 0.8  # a sustained jump: the rule keeps judging it against the level before it
    points = [{"step": i, "metric": "loss", "value": float(v)} for i, v in enumerate(values)]
    phases = [{"step": 0, "phase": "steady"}, {"step": 100, "phase": "eval"}, {"step": 110, "phase": "steady"}]
    for lo in range(0, 400, 60):
        assert sender.post({"run": {"id": "drawn"}, "phases": phases, "points": points[lo:lo + 60]}).status_code == 202
    [alert] = Alert.objects.all()
    assert (alert.first_step, alert.last_step, alert.state) == (250, 399, "firing")
    steps, centre, lower, upper = chart_band(Series.objects.get(metric="loss"), rule, start=200, end=399)
    above = values[steps] > upper
    assert not above[steps < 250].any() and above[steps >= 250].all()
    # Eval steps have their own band, from eval steps only (too few here to draw one).
    steps_all, centre_all, _, _ = chart_band(Series.objects.get(metric="loss"), rule)
    assert np.isnan(centre_all[(steps_all >= 100) & (steps_all < 110)]).all()


def test_the_band_stored_while_judging_is_the_band_a_zoomed_replay_draws(sender, project, api, owner):
    """Wide charts read the band evaluation stored per 128-step bucket; zoomed ones replay the judge: they agree."""
    from alerts.evaluation import chart_band
    from alerts.models import BandSample, Rule
    from alerts.rules import save_rule
    from ingest.models import Series

    rule = save_rule(Rule(project=project, name="loss-band", kind="band", owner="Pretrain on-call <#pretrain-oncall>",
                          scope={"metrics": ["loss"]}, persistence={"points": 3}, diagnostic_url="https://runbooks.example/l",
                          permitted_response="observe", params={"direction": "above"}), source="test")
    values = noisy(3000, level=3.0, slope=-0.0003)
    values[2000:] += 0.5
    points = [{"step": i, "metric": "loss", "value": float(v)} for i, v in enumerate(values)]
    for lo in range(0, 3000, 500):
        assert sender.post({"run": {"id": "wide"}, "points": points[lo:lo + 500]}).status_code == 202
    series = Series.objects.get(metric="loss")
    stored = {s.step: (s.centre, s.lower, s.upper) for s in BandSample.objects.filter(rule=rule, series=series)}
    assert len(stored) == 3000 // 128 + 1  # one per bucket (the first bucket's last point has a band too)
    steps, centre, lower, upper = chart_band(series, rule)
    replayed = {int(s): (c, lo, up) for s, c, lo, up in zip(steps, centre, lower, upper)}
    for step, band in stored.items():
        assert band == pytest.approx(replayed[step])
    api.force_authenticate(owner)
    wide = api.get("/api/v1/runs/wide/series/", {"metric": "loss", "band": 1, "buckets": 20}).json()
    assert wide["resolution"] == "rollup" and wide["band"]["rule"] == "loss-band"
    assert set(wide["band"]["step"]) <= set(stored)
