"""weight_jump judges a component without update_ratio against the median and MAD of its latest per-step ratios.
They are kept sorted as the window moves (RatioHistory) instead of two np.median calls a point: the numbers
must be np.median's to the bit, or an alert would fire at another step than before."""
import numpy as np
import pytest

from alerts.evaluation import RatioHistory


def numpy_figures(window):
    history = np.array(window)
    centre = np.median(history)
    return float(centre), float(np.median(np.abs(history - centre)))


@pytest.mark.parametrize("seed", range(6))
def test_the_moving_history_gives_numpys_medians_to_the_bit(seed):
    rng = np.random.default_rng(seed)
    window = int(rng.integers(2, 40))
    # Ties, repeated values and wide ranges: where a shortcut to a median goes wrong.
    ratios = np.round(rng.lognormal(-6, 2, 600), int(rng.integers(2, 9))).tolist()
    ratios[100:140] = [ratios[99]] * 40
    history = RatioHistory(ratios[:5], window)
    for k, ratio in enumerate(ratios[5:], start=5):
        history.append(ratio)
        assert history.listed() == ratios[max(0, k + 1 - window):k + 1]
        centre, spread = history.centre_and_spread()
        expected = numpy_figures(history.listed())
        assert (centre, spread) == expected, (k, history.listed())


def test_a_history_read_back_from_stored_state_goes_on_as_it_was():
    ratios = [0.003, 0.001, 0.002, 0.002, 0.05, 0.0015, 0.0011]
    whole = RatioHistory([], 4)
    for r in ratios:
        whole.append(r)
    resumed = RatioHistory(ratios[:5], 4)  # the state keeps the window's list: its first value already gone
    for r in ratios[5:]:
        resumed.append(r)
    assert resumed.listed() == whole.listed() == ratios[-4:]
    assert resumed.centre_and_spread() == whole.centre_and_spread() == numpy_figures(ratios[-4:])
