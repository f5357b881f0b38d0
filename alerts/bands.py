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

import threading
from collections import OrderedDict
from dataclasses import dataclass, fields

import bottleneck as bn
import numpy as np
import numpy.ma  # noqa: F401  np.median imports it at the first NaN it meets: at load, not in an evaluation
from numpy.lib.stride_tricks import sliding_window_view

from alerts.params import default

ABS_FLOOR = 1e-12
RECENT_POINTS = 10  # the level extrapolated from a window's trend stays between its second half and these last points
# Two band rules often judge one series with the same window (gradient-explosion and vanishing-gradient on a
# grad_norm, loss-spike and loss-under-trend on the loss), back to back: they differ only in width, floor and
# caps, so the level and spread of the same history are computed once (judged_band's, keyed by the history's
# exact bytes). One memo a thread: a web process's threads draw charts at once.
CORE_CACHE_SIZE = 32
_memo = threading.local()


def row_medians(rows: np.ndarray, in_place=False) -> np.ndarray:
    """np.median along the last axis, the same numbers, without its NaN checks and reductions (a band's rows
    are finite; np.median's overhead was most of the time of the small ones). `in_place` reorders `rows`."""
    n = rows.shape[-1]
    k = n // 2
    kth = k if n % 2 else (k - 1, k)
    if in_place:
        rows.partition(kth, axis=-1)
        middle = rows
    else:
        middle = np.partition(rows, kth, axis=-1)
    if n % 2:
        return middle[..., k]
    return (middle[..., k - 1] + middle[..., k]) / 2  # np.median: the mean of the middle two


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
    drift_ratio: float | None = None  # ratio bands: the edges at most ×/÷ this from the anchor (None: no anchor)

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
    last: np.ndarray | None = None  # band_at: the last value of the history before each point, in the metric's units
    slope: np.ndarray | None = None  # band_at: the trend per point, in the judging scale's units

    def __len__(self):
        return len(self.centre)

    def judged(self, values):
        """`values` and the band's edges on the scale it is judged on: (values, centre, lower, upper)."""
        if not self.log:
            return values, self.centre, self.lower, self.upper
        edges = self.__dict__.get("_log_edges")
        if edges is None:  # a judge asks twice (widened, then outside): the logs of the same edges once
            with np.errstate(divide="ignore", invalid="ignore"):
                edges = self.__dict__["_log_edges"] = tuple(np.log(a) for a in (self.centre, self.lower, self.upper))
        return (to_log(values), *edges)

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
    return np.log(np.maximum(values, ABS_FLOOR))  # NaN stays NaN; -inf and ≤ 0 become ABS_FLOOR


def _from_scale(centre, lower, upper, sigma, log):
    if not log:
        return Band(centre, lower, upper, sigma)
    with np.errstate(over="ignore"):
        return Band(np.exp(centre), np.exp(lower), np.exp(upper), sigma, True)


def _finish(centre, sigma, params: BandParams, anchor=None) -> Band:
    """Floor σ, cap a ratio band at max_ratio (and at drift_ratio of its anchor), and give the edges in the
    metric's units."""
    ratio = params.scale == "ratio"
    floor = params.rel_floor if ratio else params.rel_floor * np.abs(centre)
    sigma = np.maximum(sigma, np.maximum(floor, ABS_FLOOR))
    half = params.width * sigma
    if ratio and params.max_ratio is not None:
        half = np.minimum(half, np.log(params.max_ratio))
    lower, upper = centre - half, centre + half
    if ratio and params.drift_ratio is not None and anchor is not None:
        # A trend the band follows may not carry the level further than drift_ratio from where it stood a
        # window ago: a ramp or a compounding drift is judged against that anchored level.
        reach = np.log(params.drift_ratio)
        with np.errstate(invalid="ignore"):
            upper = np.where(np.isnan(anchor), upper, np.fmin(upper, anchor + reach))
            lower = np.where(np.isnan(anchor), lower, np.fmax(lower, anchor - reach))
    return _from_scale(centre, lower, upper, sigma, ratio)


def _anchor_at(values, positions, params: BandParams):
    """The level a window before each position: the median of values[i-2·window:i-window] (at least
    min_history of them), NaN where the history is shorter."""
    w = params.window
    anchor = np.full(len(positions), np.nan)
    ready = positions - w >= params.min_history
    if ready.any():
        full = ready & (positions >= 2 * w)
        if full.any():
            ends = positions[full] - w - 1  # the last point of each anchor's window
            lo = max(0, int(ends.min()) - w + 1)
            if len(ends) * w < int(ends.max()) + 1 - lo:  # a few far apart (_level_and_spread): their own medians
                anchor[full] = row_medians(sliding_window_view(values, w)[ends - w + 1])
            else:
                anchor[full] = trailing_medians(values[lo:int(ends.max()) + 1], w)[ends - lo]
        for j in np.flatnonzero(ready & ~full).tolist():
            anchor[j] = row_medians(values[:positions[j] - w])
    return anchor


def trailing_medians(values: np.ndarray, n: int) -> np.ndarray:
    """[i]: the median of values[i-n+1:i+1] (NaN for i < n-1), the same numbers as np.median of each window.

    A moving median (bottleneck's, O(log n) a step) instead of one median per window: a band's windows overlap
    all but one point, and partitioning each anew was a quarter of evaluation's time."""
    return bn.move_median(values, n)


def _level_and_spread(values: np.ndarray, starts: np.ndarray, w: int, spread=True):
    """Robust level extrapolated one point past each window values[s:s+w] (s in `starts`), and the robust σ
    around the window's trend (zero without `spread`: the least it can be)."""
    h = w // 2
    # Only the stretch the windows cover (a block's windows over a history kept 5 windows long).
    lo = int(starts.min())
    values, starts = values[lo:int(starts.max()) + w], starts - lo
    # A few windows far apart (a block's exact points: one a rollup bucket) are their own medians; a moving
    # median over the whole stretch for them cost as much as the block's narrow band. The same numbers.
    sparse = len(starts) * w < len(values)
    if sparse:
        halves = sliding_window_view(values, h)
        first, second = row_medians(halves[starts]), row_medians(halves[starts + w - h])
    else:
        halves = trailing_medians(values, h)
        first = halves[starts + h - 1]
        second = halves[starts + w - 1]
    # Centres of the halves sit (w - h) indices apart; the second's centre is at w - h + (h - 1) / 2.
    slope = (second - first) / (w - h)
    second_at = w - h + (h - 1) / 2
    if spread:
        # |window - trend| in one buffer, partitioned in place: the n × w temporaries were most of what is left.
        residual = slope[:, None] * (np.arange(w) - second_at)
        residual += second[:, None]
        np.subtract(sliding_window_view(values, w)[starts], residual, out=residual)
        np.abs(residual, out=residual)
        sigma = 1.4826 * row_medians(residual, in_place=True)
    else:
        sigma = np.zeros(len(starts))
    r = _recent(w)
    ends = starts + w - 1
    if sparse:
        last = sliding_window_view(values, r)[ends - r + 1]
        median, least, most = row_medians(last), last.min(axis=1), last.max(axis=1)
    else:
        median, least, most = trailing_medians(values, r)[ends], bn.move_min(values, r)[ends], bn.move_max(values, r)[ends]
    recent = np.clip(median + slope * (r + 1) / 2, least, most)
    return _within(second + slope * (w - second_at), second, recent), sigma, slope


def _recent(w):
    """How many of a window's last points say where the series is now."""
    return max(1, min(RECENT_POINTS, w // 2))


def _within(level, second, recent):
    """The extrapolated level, never beyond both the second half's median and the last points' median (carried
    to the next point by the same slope, within the last points' range): a step
    in the window is not a trend, and extrapolated as one it overshoots the new level (a gradient that collapsed
    ×1e-4 would stand far above a level extrapolated past it)."""
    return np.clip(level, np.fmin(second, recent), np.fmax(second, recent))


def _prefix_level_and_spread(values: np.ndarray, lengths: np.ndarray, spread=True):
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
    if spread:
        trend = second[:, None] + slope[:, None] * (cols - second_at[:, None])
        residual = np.where(cols < w[:, None], np.abs(values[np.minimum(cols, last)] - trend), np.nan)
        sigma = 1.4826 * medians(residual, w[:, None])
    else:
        sigma = np.zeros(len(lengths))
    r = np.maximum(1, np.minimum(RECENT_POINTS, w // 2))
    tail = np.where(cols < r[:, None], values[np.minimum(w[:, None] - r[:, None] + cols, last)], np.nan)
    recent = np.clip(medians(tail, r[:, None]) + slope * (r + 1) / 2, np.nanmin(tail, axis=1), np.nanmax(tail, axis=1))
    return _within(second + slope * (w - second_at), second, recent), sigma, slope


def band_at(values: np.ndarray, positions, params: BandParams = BandParams(), spread=True, memo=False) -> Band:
    """The band for values[i], from values[i-window:i], at each i in positions.

    `values` holds one series' finite values of one phase kind in the order
    they were judged; positions without `min_history` earlier values get NaN.
    Without `spread`, the narrowest band the level allows: σ at its floor
    instead of the spread around the window's trend (the costly part), so a
    point inside it is inside the band whatever the spread (judged_band).
    """
    values = np.asarray(values, dtype=float)
    positions = np.asarray(positions, dtype=np.int64)
    core = _remembered(values, positions, params, spread) if memo else _core(values, positions, params, spread)
    centre, sigma, slope, anchor, last = core
    band = _finish(centre, sigma, params, anchor)
    band.last = last
    band.slope = slope
    return band


def _remembered(values, positions, params: BandParams, spread):
    """_core, from this thread's memo of the last CORE_CACHE_SIZE."""
    cache = getattr(_memo, "cores", None)
    if cache is None:
        cache = _memo.cores = OrderedDict()
    # Not keyed by drift_ratio: a rule with an anchor and one without (gradient-explosion and vanishing-gradient
    # on a grad_norm) share the level and spread, and the anchor is added for the first that needs it.
    key = (values.tobytes(), positions.tobytes(), params.window, params.min_history, params.scale, spread)
    core = cache.get(key)
    if core is None:
        core = cache[key] = _core(values, positions, params, spread)
        if len(cache) > CORE_CACHE_SIZE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
        if core[3] is None and params.drift_ratio is not None:
            anchor = _anchor_at(to_log(values) if params.scale == "ratio" else values, positions, params)
            anchor.flags.writeable = False
            core = cache[key] = (*core[:3], anchor, core[4])
    return core


def _core(values, positions, params: BandParams, spread=True):
    """What band_at's band is made of before its width, floor and caps: (centre, σ, slope, anchor, last), in the
    judging scale but `last`; read-only, as they may be shared by two rules' bands."""
    if params.scale == "ratio":
        values = to_log(values)
    centre = np.full(len(positions), np.nan)
    sigma = np.full(len(positions), np.nan)
    slope = np.full(len(positions), np.nan)
    full = positions >= params.window
    if full.any():
        centre[full], sigma[full], slope[full] = _level_and_spread(
            values, positions[full] - params.window, params.window, spread)
    short = ~full & (positions >= params.min_history)
    if short.any():
        centre[short], sigma[short], slope[short] = _prefix_level_and_spread(values, positions[short], spread)
    anchor = _anchor_at(values, positions, params) if params.drift_ratio is not None else None
    last = np.where(positions > 0, values[np.clip(positions - 1, 0, max(0, len(values) - 1))] if len(values) else np.nan, np.nan)
    if params.scale == "ratio":
        last = np.exp(last)
    for array in (centre, sigma, slope, anchor, last):
        if array is not None:
            array.flags.writeable = False
    return centre, sigma, slope, anchor, last


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


EXCURSION_POINTS = 256


def _judged_lazily(judge, block, steps, values, merged_values, positions, params, exact):
    """judge() of a block outside an excursion, as against band_at's exact bands: the spread is computed only
    for the points the narrowest band holds and those whose band is wanted exactly (`exact`)."""
    narrow = band_at(merged_values, positions, params, spread=False, memo=True)
    held, magnitude, used = judge(block, steps[block], values[block], narrow, False)
    need = held | exact
    if need.all():
        return judge(block, steps[block], values[block], band_at(merged_values, positions, params, memo=True), False)
    # Elsewhere the band's edges and σ are not known (NaN; its centre is): nothing holds a point there, and
    # nothing reads them (sample_band keeps a band only where its edges are known).
    sub = np.flatnonzero(need)
    held = np.zeros(len(block), dtype=bool)
    magnitude = np.full(len(block), np.nan)
    parts = [np.array(used.centre, dtype=float), *(np.full(len(block), np.nan) for _ in range(3))]
    if len(sub):
        sub_held, sub_magnitude, sub_used = judge(block[sub], steps[block[sub]], values[block[sub]],
                                                  band_at(merged_values, positions[sub], params, memo=True), False)
        held[sub], magnitude[sub] = sub_held, sub_magnitude
        for part, f in zip(parts, ("centre", "lower", "upper", "sigma")):
            part[sub] = getattr(sub_used, f)
    return held, magnitude, Band(*parts, used.log)


def judged_band(kept_steps, kept_values, steps, values, params: BandParams, judge, *, pending=None,
                clear_needed=1, adapt_after=None, held_before=0, keep=500, lookahead=1024, rollback=0, exact_at=None):
    """Judge points one by one in step order, each against the band of the points before it that were kept.

    A point judged outside (held) opens an excursion: from it on the band is
    frozen at the history before the excursion, and nothing the series does
    while the excursion lasts enters that history. The excursion ends only when
    `clear_needed` points in a row are back inside the frozen band (the rule's
    `resolve_points`: the same points that resolve its alert); those points then
    join the history. So a fault that lasts stays outside the band it left for
    as long as it lasts, and an alert never ends because the band moved to the
    metric. A new normal is declared, never learnt: a phase that starts the
    baseline again (a data refresh, an announced change of the run's config),
    or a person (alerts/rebaseline.py). `adapt_after` (unset by default) is the
    old opt-in: after that many held points in a row the level is absorbed.

    Exactly the point-by-point semantics, computed `lookahead` points at a
    time (more while nothing is held): outside an excursion, bands are computed for a block as if every
    point in it were kept, up to the first held point; inside one the band is
    the same for every point, so it is computed once.

    `pending` is the excursion carried over from the previous batch: None when
    there is none, else the (steps, values) of the clear points seen since its
    last held point. `judge(index, steps, values, band, in_excursion)` ->
    (held, magnitude, band) for the given new points (`index` into the arrays
    passed here); it may widen the band (reference runs, restore tolerance) and
    return the one it used. Returns (held, magnitude, band) aligned with `steps`, the kept
    history, and the excursion's pending points (None when none is open).

    `exact_at` (aligned with `steps`) says the band is wanted exactly only at
    those points (and the magnitude only where held): outside an excursion the
    points are then first judged against the narrowest band their level allows
    (band_at without spread), and only those it holds are judged again against
    the exact band, so the spread is computed for few points. `judge` must then
    never hold a point in a band it would not hold in a narrower one (wider
    edges, larger σ: never more held), which is what makes the answers the same.
    """
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    n = len(steps)
    order = np.argsort(steps, kind="stable")
    held = np.zeros(n, dtype=bool)
    magnitude = np.full(n, np.nan)
    out = {f: np.full(n, np.nan) for f in ("centre", "lower", "upper", "sigma")}
    kept_steps, kept_values = np.asarray(kept_steps, dtype=np.int64), np.asarray(kept_values, dtype=float)
    if pending is not None:
        pending = (list(np.asarray(pending[0], dtype=np.int64).tolist()), list(np.asarray(pending[1], dtype=float).tolist()))
    clear_needed = max(1, int(clear_needed))
    run = held_before if pending is not None else 0  # held points in a row (adapt_after)

    def keep_points(add_steps, add_values):
        nonlocal kept_steps, kept_values
        if not len(add_steps):
            return
        merged = np.concatenate([kept_steps, np.asarray(add_steps, dtype=np.int64)])
        merged_order = np.argsort(merged, kind="stable")
        kept_steps = merged[merged_order][-keep:]
        kept_values = np.concatenate([kept_values, np.asarray(add_values, dtype=float)])[merged_order][-keep:]

    i, size = 0, lookahead
    while i < n:
        # A block twice as long after one that held nothing (up to 4 × lookahead), back to `lookahead` after a
        # held point: a quiet series is judged in few numpy passes, one that keeps leaving its band wastes little.
        # In an excursion the band is frozen for a block, so a long one absorbed by the old opt-in (adapt_after)
        # moves its band every EXCURSION_POINTS, as it always did.
        block = order[i:i + (EXCURSION_POINTS if pending is not None else size)]
        if pending is not None:
            # The excursion's band: the history before it, frozen, the same for every point.
            one = band_at(kept_values, [len(kept_values)], params, memo=True)
            band = Band(*(np.repeat(getattr(one, f), len(block)) for f in ("centre", "lower", "upper", "sigma")), one.log,
                        np.repeat(one.last, len(block)))
        else:
            merged_steps = np.concatenate([kept_steps, steps[block]])
            merged_order = np.argsort(merged_steps, kind="stable")
            merged_steps = merged_steps[merged_order]
            merged_values = np.concatenate([kept_values, values[block]])[merged_order]
            positions = np.searchsorted(merged_steps, steps[block], side="left")
            band = None if exact_at is not None else band_at(merged_values, positions, params, memo=True)
        if band is None:
            block_held, block_magnitude, band = _judged_lazily(judge, block, steps, values, merged_values, positions,
                                                               params, exact_at[block])
        else:
            block_held, block_magnitude, band = judge(block, steps[block], values[block], band, pending is not None)
        flags = block_held.tolist()
        if pending is None:
            # Valid up to and including the first held point; those before it are kept.
            upto = flags.index(True) + 1 if True in flags else len(block)
            clear = block[:upto - 1] if True in flags[:upto] else block[:upto]
            keep_points(steps[clear], values[clear])
            if flags[upto - 1]:
                pending, run = ([], []), 1
                if rollback:
                    # The points just before it may be the start of the shift that opened it (a level judged over
                    # `rollback` points moves before it is held): the band it is frozen at is the one before them.
                    kept_steps, kept_values = kept_steps[:-rollback], kept_values[:-rollback]
        else:
            upto = len(block)
            for k, h in enumerate(flags):
                index = block[k]
                if h:
                    run += 1
                    if adapt_after is not None and run > adapt_after:
                        keep_points([steps[index]], [values[index]])  # the opt-in: a long excursion is absorbed
                    pending = ([], [])
                    continue
                pending[0].append(int(steps[index]))
                pending[1].append(float(values[index]))
                if len(pending[0]) >= clear_needed:
                    keep_points(*pending)  # back inside the band it left: the excursion is over
                    pending, run = None, 0
                    upto = k + 1
                    break
        final = block[:upto]
        held[final], magnitude[final] = block_held[:upto], block_magnitude[:upto]
        for f in out:
            out[f][final] = getattr(band, f)[:upto]
        i += upto
        size = min(size * 2, 4 * lookahead) if upto == len(block) and not block_held[:upto].any() else lookahead
    band = Band(out["centre"], out["lower"], out["upper"], out["sigma"], params.scale == "ratio")
    if pending is not None:
        pending = (np.asarray(pending[0], dtype=np.int64), np.asarray(pending[1], dtype=float))
    return held, magnitude, band, (kept_steps, kept_values), pending
