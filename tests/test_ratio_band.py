"""A band on a positive metric is a ratio to its level: never a lower edge ≤ 0, and a 10× drop crosses it."""
import numpy as np
import pytest

from alerts.bands import BandParams, band_at, reference_band


def noisy_positive(n, rng, level=20_000.0, share=0.5):
    """±`share` of the level from step to step, as throughput on a shared machine."""
    return level * (1 + rng.uniform(-share, share, n))


def test_a_noisy_positive_metric_has_a_positive_lower_edge_that_a_tenfold_drop_crosses():
    rng = np.random.default_rng(21)
    values = noisy_positive(1500, rng)
    positions = np.arange(100, 1500)
    ratio = band_at(values, positions, BandParams(scale="ratio", width=6.0, max_ratio=4.0))
    assert (ratio.lower > 0).all()
    assert (values[positions] / 10 < ratio.lower).all()
    # The same series on a linear band: its lower edge sits at or below zero, so no drop could cross it.
    linear = band_at(values, positions, BandParams(width=6.0))
    assert (linear.lower <= 0).mean() > 0.9


def test_without_a_cap_the_ratio_band_still_follows_the_noise_and_stays_positive():
    rng = np.random.default_rng(22)
    values = np.exp(rng.normal(np.log(3.0), 0.6, 800))  # a very noisy positive series
    band = band_at(values, np.arange(50, 800), BandParams(scale="ratio", width=3.0))
    assert (band.lower > 0).all() and (band.upper > band.centre).all() and (band.centre > band.lower).all()
    inside = (values[50:] >= band.lower) & (values[50:] <= band.upper)
    assert inside.mean() > 0.9


def test_a_quiet_metric_gets_a_narrow_ratio_band_symmetric_in_ratio():
    rng = np.random.default_rng(23)
    values = 2.0 * np.exp(rng.normal(0, 0.01, 400))
    band = band_at(values, [300], BandParams(scale="ratio", width=6.0, max_ratio=4.0))
    assert 1.03 < band.upper[0] / band.centre[0] < 1.2
    assert band.upper[0] / band.centre[0] == pytest.approx(band.centre[0] / band.lower[0])


def test_a_zero_is_below_any_ratio_band_and_reference_runs_give_ratio_bands_too():
    rng = np.random.default_rng(24)
    values = noisy_positive(300, rng, level=5.0, share=0.2)
    band = band_at(values, [250], BandParams(scale="ratio"))
    held, beyond = band.outside(np.array([0.0]), "below")
    assert held[0] and beyond[0] > 0
    steps = np.arange(300)
    reference = reference_band([(steps, values)], np.array([150]), BandParams(scale="ratio", max_ratio=4.0))
    assert 0 < reference.lower[0] < 5.0 < reference.upper[0]
