"""Phase-aware baseline bands: the one place a band is computed.

Band rules (alerts/evaluation.py) and the console's charts both call
`band_at`, so the band a reviewer sees is the band the rule checked.

The band for a point comes from the points before it of the same phase kind
(a checkpoint pause is judged against earlier checkpoints, training steps
against training steps): the last `window` of them, split in two halves whose
medians give a level and a trend, extrapolated to the next point; the spread is
1.4826 × the median absolute residual around that trend line (a robust σ, so
one spike in the history does not widen the band). A floor relative to the
level keeps a flat series (a constant learning rate) from having a zero-width
band. Fewer than `min_history` points: no band (NaN), so nothing is judged.

Positive quantities (rates, norms, losses, times) are judged on a ratio scale
(`scale="ratio"`): the same level, trend and spread computed on log(value), so
the band is a ratio to the expected level and its lower edge is never ≤ 0 (in
linear units a series whose step-to-step noise is half its level has a lower
edge at or below zero, which no drop can cross). `rel_floor` is then the least
σ in log units (about the same share of the level for small shares), and
`max_ratio` caps the band at ×/÷ that ratio of the level, so a noisy metric
(±50% from step to step) still has a band a 10× drop crosses. Every band
returned here is in the metric's own units (a chart draws it as it is); only
`sigma` is in the judging scale's units (log units for a ratio band).

Reference runs (runs of the project marked `reference`) add a second band at
the same step; the band is then the envelope of the two, so a point is outside
only when it is outside both the run's own history and what reference runs
did at that step.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from alerts.params import default

ABS_FLOOR = 1e-12


@dataclass(frozen=True)
class BandParams:
    """The band's shape; defaults, ranges and meanings are the band rule's params (alerts/params.py)."""

    window: int = default("band", "window")  # points of history (same phase kind)
    min_history: int = default("band", "min_history")
    width: float = default("band", "width")  # band half-width, in robust σ
    rel_floor: float = default("band", "rel_floor")  # σ is at least this share of |level|
    reference_window: int = default("band", "reference_window")  # steps either side of a step, pooled over reference runs
    scale: str = default("band", "scale")  # "linear", or "ratio": judged on log(value)
    max_ratio: float | None = None  # ratio bands: the edges at most ×/÷ this from the level (None: no cap)

    @classmethod
    def from_params(cls, params: dict | None) -> "BandParams":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (params or {}).items() if k in names})


@dataclass
class Band:
    """A band in the metric's own units; `sigma` in the judging scale's units (log units when `log`)."""

    centre: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    sigma: np.ndarray
    log: bool = False

    def __len__(self):
        return len(self.centre)

    def judged(self, values):
        """`values` and the band's edges on the scale it is judged on: (values, centre, lower, upper)."""
        if not self.log:
            return values, self.centre, self.lower, self.upper
        with np.errstate(divide="ignore", invalid="ignore"):
            return (to_log(values), *(np.log(a) for a in (self.centre, self.lower, self.upper)))

    def outside(self, values, direction):
        """(held, distance beyond the band in σ): held above, below or on either side per `direction`."""
        v, _, lower, upper = self.judged(np.asarray(values, dtype=float))
        with np.errstate(invalid="ignore"):
            above = v > upper
            below = v < lower
            beyond = np.where(above, v - upper, lower - v) / self.sigma
        if direction == "above":
            return above, beyond
        if direction == "below":
            return below, beyond
        return above | below, beyond

    def widened(self, where, share):
        """The band, where `where`, at least ±`share` of the level wide (a ratio of 1 + share on a ratio band),
        its lower side at least as wide as its upper side."""
        _, centre, lower, upper = self.judged(np.empty(0))
        least = np.log1p(share) if self.log else share * np.abs(centre)
        up = np.where(where, np.maximum(upper - centre, least), upper - centre)
        down = np.where(where, np.maximum(centre - lower, up), centre - lower)
        return _from_scale(centre, centre - down, centre + up, self.sigma, self.log)


def to_log(values):
    """log(value), a value ≤ 0 as the log of ABS_FLOOR: far below any positive level, never NaN."""
    with np.errstate(invalid="ignore"):
        return np.log(np.where(values > ABS_FLOOR, values, np.where(np.isnan(values), np.nan, ABS_FLOOR)))


def _from_scale(centre, lower, upper, sigma, log):
    if not log:
        return Band(centre, lower, upper, sigma)
    with np.errstate(over="ignore"):
        return Band(np.exp(centre), np.exp(lower), np.exp(upper), sigma, True)


def _finish(centre, sigma, params: BandParams) -> Band:
    """Floor σ, cap a ratio band at max_ratio, and give the edges in the metric's units."""
    ratio = params.scale == "ratio"
    floor = params.rel_floor if ratio else params.rel_floor * np.abs(centre)
    sigma = np.maximum(sigma, np.maximum(floor, ABS_FLOOR))
    half = params.width * sigma
    if ratio and params.max_ratio is not None:
        half = np.minimum(half, np.log(params.max_ratio))
    return _from_scale(centre, centre - half, centre + half, sigma, ratio)


def _level_and_spread(windows: np.ndarray):
    """Robust level extrapolated one point past each row, and the robust σ around the row's trend."""
    w = windows.shape[1]
    h = w // 2
    first = np.median(windows[:, :h], axis=1)
    second = np.median(windows[:, w - h:], axis=1)
    # Centres of the halves sit (w - h) indices apart; the second's centre is at w - h + (h - 1) / 2.
    slope = (second - first) / (w - h)
    second_at = w - h + (h - 1) / 2
    trend = second[:, None] + slope[:, None] * (np.arange(w) - second_at)
    sigma = 1.4826 * np.median(np.abs(windows - trend), axis=1)
    return second + slope * (w - second_at), sigma


def _prefix_level_and_spread(values: np.ndarray, lengths: np.ndarray):
    """_level_and_spread of the rows values[:L] for each L in `lengths`, all at once (rows of unequal length:
    NaN-padded, sorted, medians taken at each row's own middle; the same numbers as row by row)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    w = lengths[:, None]
    h = w // 2
    cols = np.arange(int(lengths.max()))[None, :]
    last = len(values) - 1

    def medians(rows, counts):
        rows = np.sort(rows, axis=1)  # NaN (padding) sorts last
        lo = np.take_along_axis(rows, (counts - 1) // 2, axis=1)[:, 0]
        hi = np.take_along_axis(rows, counts // 2, axis=1)[:, 0]
        return (lo + hi) / 2  # np.median: the mean of the middle two (of one twice: itself)

    first = medians(np.where(cols < h, values[np.minimum(cols, last)], np.nan), h)
    second = medians(np.where(cols < h, values[np.minimum(w - h + cols, last)], np.nan), h)
    w, h = w[:, 0], h[:, 0]
    slope = (second - first) / (w - h)
    second_at = w - h + (h - 1) / 2
    trend = second[:, None] + slope[:, None] * (cols - second_at[:, None])
    residual = np.where(cols < w[:, None], np.abs(values[np.minimum(cols, last)] - trend), np.nan)
    sigma = 1.4826 * medians(residual, w[:, None])
    return second + slope * (w - second_at), sigma


def band_at(values: np.ndarray, positions, params: BandParams = BandParams()) -> Band:
    """The band for values[i], from values[i-window:i], at each i in positions.

    `values` holds one series' finite values of one phase kind in the order
    they were judged; positions without `min_history` earlier values get NaN.
    """
    values = np.asarray(values, dtype=float)
    if params.scale == "ratio":
        values = to_log(values)
    positions = np.asarray(positions, dtype=np.int64)
    centre = np.full(len(positions), np.nan)
    sigma = np.full(len(positions), np.nan)
    full = positions >= params.window
    if full.any():
        windows = sliding_window_view(values, params.window)[positions[full] - params.window]
        centre[full], sigma[full] = _level_and_spread(windows)
    short = ~full & (positions >= params.min_history)
    if short.any():
        centre[short], sigma[short] = _prefix_level_and_spread(values, positions[short])
    return _finish(centre, sigma, params)


def reference_band(reference_points, steps, params: BandParams = BandParams()) -> Band:
    """Band at each step from reference runs' points within ±reference_window steps of it.

    `reference_points` is a list of (steps, values) arrays, one per reference run.
    """
    steps = np.asarray(steps, dtype=np.int64)
    centre = np.full(len(steps), np.nan)
    sigma = np.full(len(steps), np.nan)
    if reference_points:
        all_steps = np.concatenate([s for s, _ in reference_points])
        all_values = np.concatenate([v for _, v in reference_points])
        if params.scale == "ratio":
            all_values = to_log(all_values)
        keep = np.isfinite(all_values)
        order = np.argsort(all_steps[keep], kind="stable")
        ref_steps, ref_values = all_steps[keep][order], all_values[keep][order]
        lo = np.searchsorted(ref_steps, steps - params.reference_window, side="left")
        hi = np.searchsorted(ref_steps, steps + params.reference_window, side="right")
        for j in np.flatnonzero(hi - lo >= params.min_history):
            near = ref_values[lo[j]:hi[j]]
            centre[j] = np.median(near)
            sigma[j] = 1.4826 * np.median(np.abs(near - centre[j]))
    return _finish(centre, sigma, params)


def envelope(own: Band, reference: Band) -> Band:
    """Outside only when outside both; where one is missing, the other alone."""
    lower = np.fmin(own.lower, reference.lower)
    upper = np.fmax(own.upper, reference.upper)
    centre = np.where(np.isnan(own.centre), reference.centre, own.centre)
    sigma = np.where(np.isnan(own.centre), reference.sigma, own.sigma)
    return Band(centre, lower, upper, sigma, own.log)


def series_band(series, start=None, end=None, params: BandParams = BandParams(), every: int = 1, phases=None):
    """The band of one stored series over [start, end], as a chart draws it behind the line.

    The same `band_at` the band rules call, on the same history: per phase kind
    (a restart continuing the kind before it), the newest attempt of each step,
    in step order, starting again after a data refresh. `every` computes it at
    every n-th point only (a chart's bucket ends). Returns steps, centre, lower,
    upper arrays.
    """
    from ingest.phases import PhaseIndex
    from ingest.storage import read_points

    phases = phases or PhaseIndex(series.run)
    # Enough history before `start` to fill a window even with other phases interleaved.
    history_from = None if start is None else max(0, start - 20 * params.window)
    steps, values, _ = read_points(series, history_from, end)
    _, baseline, _, reset = phases.of(steps)
    keep = np.isfinite(values)
    out_steps, parts = [], []
    for refresh in np.unique(reset):
        for kind in set(baseline[reset == refresh]):
            chosen = np.flatnonzero((reset == refresh) & (baseline == kind) & keep)
            wanted = chosen if start is None else chosen[steps[chosen] >= start]
            if not len(wanted):
                continue
            wanted = wanted[::every]
            positions = np.searchsorted(chosen, wanted)
            band = band_at(values[chosen], positions, params)
            out_steps.append(steps[wanted])
            parts.append(band)
    if not out_steps:
        empty = np.array([])
        return empty.astype(np.int64), empty, empty, empty
    all_steps = np.concatenate(out_steps)
    order = np.argsort(all_steps, kind="stable")
    return (all_steps[order], *(np.concatenate([getattr(b, f) for b in parts])[order] for f in ("centre", "lower", "upper")))


def judged_band(kept_steps, kept_values, steps, values, params: BandParams, judge, *, held_before=0,
                adapt_after=200, keep=500, lookahead=256):
    """Judge points one by one in step order, each against the band of the points before it that were kept.

    A point judged outside (held) stays out of the history while its excursion
    lasts (`adapt_after` points in a row at most), so a sustained excursion is
    measured against the level before it instead of being absorbed; a level
    held longer than that becomes the new baseline. Exactly the point-by-point
    semantics, computed `lookahead` points at a time: bands are computed for a
    block as if every point in it were kept, and the rest of the block is
    computed again only after a point that was held out. During an excursion
    (the last point held out, every new step after the history's) the band is
    the same for every point until one is kept, so it is computed once.

    `judge(index, steps, values, band)` -> (held, magnitude, band) for the given
    new points (`index` into the arrays passed here); it may widen the band
    (reference runs, restore tolerance) and return the one it used.
    Returns (held, magnitude, band) aligned with `steps`, and the kept history.
    """
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    n = len(steps)
    order = np.argsort(steps, kind="stable")
    held = np.zeros(n, dtype=bool)
    magnitude = np.full(n, np.nan)
    out = {f: np.full(n, np.nan) for f in ("centre", "lower", "upper", "sigma")}
    kept_steps, kept_values = np.asarray(kept_steps, dtype=np.int64), np.asarray(kept_values, dtype=float)
    run = held_before
    held_out = False  # the last point judged was held and kept out of the history
    i = 0
    while i < n:
        block = order[i:i + lookahead]
        after_history = not len(kept_steps) or steps[block[0]] > kept_steps[-1]
        constant = held_out and after_history
        if constant:
            # Every point of the block has the kept history before it and nothing else, while they are held out.
            one = band_at(kept_values, [len(kept_values)], params)
            band = Band(*(np.repeat(getattr(one, f), len(block)) for f in ("centre", "lower", "upper", "sigma")), one.log)
        else:
            merged_steps = np.concatenate([kept_steps, steps[block]])
            merged_order = np.argsort(merged_steps, kind="stable")
            merged_steps = merged_steps[merged_order]
            merged_values = np.concatenate([kept_values, values[block]])[merged_order]
            band = band_at(merged_values, np.searchsorted(merged_steps, steps[block], side="left"), params)
        block_held, block_magnitude, band = judge(block, steps[block], values[block], band)
        # The block's bands hold up to the first point whose keeping differs from what they assumed (among
        # older steps, up to the first held one: the history is cut to `keep` points after each).
        accepted = np.ones(len(block), dtype=bool)
        upto = len(block)
        if constant or block_held.any():
            for k, h in enumerate(block_held.tolist()):
                run = run + 1 if h else 0
                accepted[k] = not h or run > adapt_after
                if accepted[k] == constant or (h and not after_history):
                    upto = k + 1
                    break
        else:
            run = 0
        held_out = not accepted[upto - 1]
        accepted = accepted[:upto]
        final = block[:upto]
        held[final], magnitude[final] = block_held[:upto], block_magnitude[:upto]
        for f in out:
            out[f][final] = getattr(band, f)[:upto]
        add_steps, add_values = steps[final][accepted], values[final][accepted]
        merged = np.concatenate([kept_steps, add_steps])
        merged_order = np.argsort(merged, kind="stable")
        kept_steps = merged[merged_order][-keep:]
        kept_values = np.concatenate([kept_values, add_values])[merged_order][-keep:]
        i += upto
    band = Band(out["centre"], out["lower"], out["upper"], out["sigma"], params.scale == "ratio")
    return held, magnitude, band, (kept_steps, kept_values)
