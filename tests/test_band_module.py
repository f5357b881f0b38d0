"""alerts/bands.py: the band a chart draws and a band rule checks."""
import numpy as np

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
