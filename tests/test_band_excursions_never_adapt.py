"""alerts/bands.py judged_band: an excursion is judged against the band it left, frozen, until the series is back
inside it; a band never learns a lasting change of level by itself (issue 20: "a lasting fault goes quiet")."""
import numpy as np

from alerts.bands import BandParams, judged_band

PARAMS = BandParams(window=100, min_history=20, width=6.0, scale="ratio", max_ratio=2.0)


def judge_above_or_below(index, steps, values, band, in_excursion):
    held, beyond = band.outside(values, "below")
    return held, beyond, band


def throughput(n, seed=0):
    return 1000 * np.exp(np.random.default_rng(seed).normal(0, 0.05, n))


def test_a_tenfold_drop_that_lasts_stays_held_to_the_last_point_and_the_band_stays_where_it_was():
    values = throughput(6000)
    values[1000:] /= 10
    held, _, band, kept, pending = judged_band([], [], np.arange(6000), values, PARAMS, judge_above_or_below,
                                               clear_needed=10)
    assert held[1000:].all() and not held[100:1000].any()
    assert np.allclose(band.centre[1000:], band.centre[1000])  # frozen at the level it left
    assert 900 < band.centre[-1] < 1100
    assert kept[1].max() > 500  # nothing of the drop entered the history
    assert pending is not None and len(pending[0]) == 0  # still in its excursion


def test_the_same_verdicts_batch_by_batch_carrying_the_excursion_over():
    values = throughput(3000, seed=1)
    values[1000:1600] /= 10
    whole, *_ = judged_band([], [], np.arange(3000), values, PARAMS, judge_above_or_below, clear_needed=10)
    kept, pending, parts = ([], []), None, []
    for lo in range(0, 3000, 250):
        steps = np.arange(lo, lo + 250)
        held, _, _, kept, pending = judged_band(kept[0], kept[1], steps, values[steps], PARAMS, judge_above_or_below,
                                                pending=pending, clear_needed=10, keep=500)
        parts.append(held)
    assert np.array_equal(np.concatenate(parts), whole)


def test_an_excursion_ends_once_the_series_is_back_for_the_points_that_resolve_it_and_they_join_the_history():
    values = throughput(2000, seed=2)
    values[1000:1300] /= 10
    held, _, band, kept, pending = judged_band([], [], np.arange(2000), values, PARAMS, judge_above_or_below,
                                               clear_needed=10, keep=5000)
    assert held[1000:1300].all() and not held[1300:].any()
    assert pending is None
    assert 1300 in kept[0] and 1299 not in kept[0]


def test_the_old_opt_in_absorbs_a_long_excursion():
    values = throughput(2000, seed=3)
    values[1000:] /= 10
    held, *_ = judged_band([], [], np.arange(2000), values, PARAMS, judge_above_or_below, clear_needed=10,
                           adapt_after=200)
    assert held[1000:1200].all() and not held[1400:].any()
