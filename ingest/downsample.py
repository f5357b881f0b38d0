"""Chart data for one series: at most N buckets over a step range, never hiding a spike.

Each bucket keeps the min and max of its finite values, the last value (the
line) and how many non-finite values it held, so a one-step spike or a single
NaN anywhere in a 10 M-point run shows at every zoom level. Wide ranges read
the rollups (128 steps each, kept by ingest for the newest attempt of each
step); narrow ranges read the raw points, so zooming in fetches finer data.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ingest.models import ROLLUP_WIDTH, Rollup
from ingest.storage import from_db_float, read_points

# Up to this many raw points per requested bucket, raw points are cheaper than rollups and exact.
RAW_POINTS_PER_BUCKET = 8


@dataclass
class Buckets:
    resolution: str  # "raw" or "rollup"
    bucket_steps: int  # steps per bucket
    step: np.ndarray  # last step of each bucket
    min: np.ndarray  # finite values only; NaN when the bucket had none
    max: np.ndarray
    last: np.ndarray  # the bucket's last value (may be non-finite)
    count: np.ndarray
    nonfinite: np.ndarray


def series_buckets(series, start: int | None, end: int | None, buckets: int) -> Buckets:
    lo = 0 if start is None else start
    hi = series.max_step if end is None else min(end, series.max_step)
    span = max(hi - lo + 1, 1)
    if span <= buckets * RAW_POINTS_PER_BUCKET:
        return _from_points(series, lo, hi, buckets)
    return _from_rollups(series, lo, hi, buckets)


def _group(keys: np.ndarray):
    """Start index of each run of equal keys (keys sorted)."""
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def _from_points(series, lo, hi, buckets) -> Buckets:
    steps, values, _ = read_points(series, lo, hi)
    width = max(1, -(-(hi - lo + 1) // buckets))
    if not len(steps):
        return _empty("raw", width)
    keys = (steps - lo) // width
    starts = _group(keys)
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore"):
        mins = np.fmin.reduceat(np.where(finite, values, np.inf), starts)
        maxs = np.fmax.reduceat(np.where(finite, values, -np.inf), starts)
    mins[np.isinf(mins) & (mins > 0)] = np.nan
    maxs[np.isinf(maxs) & (maxs < 0)] = np.nan
    ends = np.r_[starts[1:], len(steps)] - 1
    counts = np.diff(np.r_[starts, len(steps)])
    nonfinite = np.add.reduceat((~finite).astype(np.int64), starts)
    return Buckets("raw", width, steps[ends], mins, maxs, values[ends], counts, nonfinite)


def _from_rollups(series, lo, hi, buckets) -> Buckets:
    rows = list(
        Rollup.objects.filter(series=series, bucket__gte=lo // ROLLUP_WIDTH, bucket__lte=hi // ROLLUP_WIDTH)
        .order_by("bucket")
        .values_list("bucket", "min_value", "max_value", "last_step", "last_value", "count", "nonfinite_count")
    )
    rollups_per_bucket = max(1, -(-((hi // ROLLUP_WIDTH) - (lo // ROLLUP_WIDTH) + 1) // buckets))
    if not rows:
        return _empty("rollup", rollups_per_bucket * ROLLUP_WIDTH)
    bucket, mn, mx, last_step, last_value, count, nonfinite = (np.array(col) for col in zip(*rows))
    mn = np.array([np.nan if v is None else v for v in mn], dtype=float)
    mx = np.array([np.nan if v is None else v for v in mx], dtype=float)
    last_value = np.array([from_db_float(v) for v in last_value], dtype=float)
    keys = (bucket.astype(np.int64) - lo // ROLLUP_WIDTH) // rollups_per_bucket
    starts = _group(keys)
    ends = np.r_[starts[1:], len(keys)] - 1
    with np.errstate(invalid="ignore"):
        mins = np.fmin.reduceat(mn, starts)
        maxs = np.fmax.reduceat(mx, starts)
    return Buckets(
        "rollup", rollups_per_bucket * ROLLUP_WIDTH, last_step.astype(np.int64)[ends], mins, maxs, last_value[ends],
        np.add.reduceat(count.astype(np.int64), starts), np.add.reduceat(nonfinite.astype(np.int64), starts),
    )


def _empty(resolution, width) -> Buckets:
    nothing = np.array([], dtype=float)
    none = np.array([], dtype=np.int64)
    return Buckets(resolution, width, none, nothing, nothing, nothing, none, none)
