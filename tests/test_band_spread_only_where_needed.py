"""alerts/bands.py: what makes band rules cheap must not change what they decide.

Evaluation works a band's spread (σ) out only for the points the narrowest band their level allows holds and
for the points whose band is kept (judged_band's exact_at); the medians come from moving medians. Both must
give the same held points, magnitudes, kept history and open excursion as the exact band at every point, and
the same band where one is kept, on series that spike, drift, drop for good and come back.
"""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from alerts.bands import BandParams, band_at, judged_band, trailing_medians

CASES = {
    "ratio, capped, anchored": BandParams(window=100, min_history=20, width=6.0, rel_floor=0.07, scale="ratio",
                                          max_ratio=2.0, drift_ratio=1.5),
    "ratio, narrow floor": BandParams(window=100, min_history=20, width=6.0, rel_floor=0.01, scale="ratio"),
    "linear": BandParams(window=50, min_history=10, width=4.0, rel_floor=0.001, scale="linear"),
}


def troubled_series(n, seed):
    """Noise with spikes, a slow drift, a drop that comes back and one that lasts, and repeated values."""
    rng = np.random.default_rng(seed)
    values = 100 * np.exp(rng.normal(0, 0.08, n)) * np.linspace(1, 1.6, n)
    values[rng.choice(n, n // 40, replace=False)] *= rng.choice([0.2, 5.0], n // 40)
    values[n // 4:n // 4 + 60] /= 3
    values[3 * n // 4:] *= 4
    values[n // 2:n // 2 + 30] = values[n // 2]  # ties
    return values


def judge(direction):
    def judged(index, steps, values, band, in_excursion):
        held, beyond = band.outside(values, direction)
        return held, beyond, band
    return judged


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("direction", ["above", "below", "either"])
def test_judging_with_the_spread_only_where_needed_decides_as_the_exact_band(name, direction):
    params = CASES[name]
    for seed in range(3):
        values = troubled_series(3000, seed)
        steps = np.arange(len(values))
        wanted = np.random.default_rng(seed).random(len(values)) < 0.05
        exact = judged_band([], [], steps, values, params, judge(direction), clear_needed=5)
        lazy = judged_band([], [], steps, values, params, judge(direction), clear_needed=5, exact_at=wanted)
        held, magnitude, band, kept, pending = exact
        assert held.any() and not held.all()  # the series gives the judge something to decide
        assert np.array_equal(lazy[0], held)
        assert np.array_equal(lazy[1][held], magnitude[held])
        for f in ("centre", "lower", "upper"):
            assert np.array_equal(getattr(lazy[2], f)[wanted], getattr(band, f)[wanted], equal_nan=True), f
        assert all(np.array_equal(a, b) for a, b in zip(lazy[3], kept))
        assert (lazy[4] is None) == (pending is None)


def test_the_same_decisions_batch_by_batch():
    params = CASES["ratio, capped, anchored"]
    values = troubled_series(4000, seed=7)
    whole = judged_band([], [], np.arange(4000), values, params, judge("either"), clear_needed=5)[0]
    kept, pending, parts = ([], []), None, []
    for lo in range(0, 4000, 700):
        steps = np.arange(lo, min(lo + 700, 4000))
        held, _, _, kept, pending = judged_band(kept[0], kept[1], steps, values[steps], params, judge("either"),
                                                pending=pending, clear_needed=5,
                                                exact_at=np.zeros(len(steps), dtype=bool))
        parts.append(held)
    assert np.array_equal(np.concatenate(parts), whole)


def test_moving_medians_are_numpys_medians_to_the_bit():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n, width = int(rng.integers(2, 600)), int(rng.integers(1, 120))
        width = min(width, n)
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6)
        if rng.random() < 0.4:
            values = np.round(values, 1)  # ties
        assert np.array_equal(trailing_medians(values, width)[width - 1:],
                              np.median(sliding_window_view(values, width), axis=1))


def test_a_band_without_its_spread_is_never_wider_than_the_band():
    values = troubled_series(2000, seed=11)
    positions = np.arange(0, 2000, 7)
    for params in CASES.values():
        exact, narrow = band_at(values, positions, params), band_at(values, positions, params, spread=False)
        known = ~np.isnan(exact.centre)
        assert np.array_equal(narrow.centre, exact.centre, equal_nan=True)
        assert (narrow.upper[known] <= exact.upper[known]).all() and (narrow.lower[known] >= exact.lower[known]).all()


def test_the_band_at_a_few_points_far_apart_is_the_band_at_every_point_to_the_bit():
    # A block's exact points (one a rollup bucket) take their windows' own medians instead of moving medians
    # over the whole block: the same numbers, anchor and trend included.
    values = troubled_series(3000, seed=5)
    every = np.arange(len(values))
    for params in CASES.values():
        whole = band_at(values, every, params)
        for few in (np.array([2999]), np.arange(120, 3000, 250), np.array([25, 1500, 2990])):
            part = band_at(values, few, params)
            for f in ("centre", "lower", "upper", "sigma", "slope", "last"):
                assert np.array_equal(getattr(part, f), getattr(whole, f)[few], equal_nan=True), f
