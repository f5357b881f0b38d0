"""The one module that reads and writes stored points.

Layout (see ingest/models.py): a `Block` row per (series, attempt, batch) holds
the points packed and zlib-compressed — steps as int64 deltas, values as raw
IEEE-754 doubles (so NaN and ±Infinity round-trip bit for bit on any database),
and, only when the sender gave them, times as int64 microsecond deltas. A
`Rollup` row per series and bucket of ROLLUP_WIDTH steps keeps min, max, last,
count and non-finite count of the newest attempt of each step, so a chart that
downsamples can always show a one-step spike or a NaN.
"""
from __future__ import annotations

import math
import struct
import zlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.db.models import Q

from ingest.models import ROLLUP_WIDTH, Block, Rollup

_HEADER = struct.Struct("<BI")
_HAS_TIMES = 1


def db_float(value: float) -> float | None:
    """NaN is stored as NULL (SQLite turns a NaN REAL into NULL anyway); ±inf are kept."""
    return None if value != value else value


def from_db_float(value: float | None) -> float:
    return math.nan if value is None else value


def pack(steps: np.ndarray, values: np.ndarray, times: np.ndarray | None) -> bytes:
    n = len(steps)
    deltas = np.diff(steps, prepend=np.int64(0)).astype("<i8")
    parts = [_HEADER.pack(_HAS_TIMES if times is not None else 0, n), deltas.tobytes(), values.astype("<f8").tobytes()]
    if times is not None:
        micros = np.round(times * 1e6).astype("<i8")
        parts.append(np.diff(micros, prepend=np.int64(0)).astype("<i8").tobytes())
    return zlib.compress(b"".join(parts), 1)


def unpack(data: bytes):
    raw = zlib.decompress(bytes(data))
    flags, n = _HEADER.unpack_from(raw)
    offset = _HEADER.size
    steps = np.frombuffer(raw, dtype="<i8", count=n, offset=offset).cumsum()
    values = np.frombuffer(raw, dtype="<f8", count=n, offset=offset + 8 * n).copy()
    times = None
    if flags & _HAS_TIMES:
        times = np.frombuffer(raw, dtype="<i8", count=n, offset=offset + 16 * n).cumsum() / 1e6
    return steps, values, times


@dataclass
class Summary:
    count: int
    nonfinite_count: int
    min_value: float | None
    max_value: float | None
    last_step: int
    last_value: float

    @classmethod
    def of(cls, steps: np.ndarray, values: np.ndarray) -> Summary:
        finite = np.isfinite(values)
        nfinite = int(finite.sum())
        last = int(np.argmax(steps))
        return cls(
            count=len(values),
            nonfinite_count=len(values) - nfinite,
            min_value=float(values[finite].min()) if nfinite else None,
            max_value=float(values[finite].max()) if nfinite else None,
            last_step=int(steps[last]),
            last_value=float(values[last]),
        )

    def merge(self, other: Summary) -> Summary:
        mins = [v for v in (self.min_value, other.min_value) if v is not None]
        maxs = [v for v in (self.max_value, other.max_value) if v is not None]
        later = other if other.last_step >= self.last_step else self
        return Summary(
            count=self.count + other.count,
            nonfinite_count=self.nonfinite_count + other.nonfinite_count,
            min_value=min(mins) if mins else None,
            max_value=max(maxs) if maxs else None,
            last_step=later.last_step,
            last_value=later.last_value,
        )


class BlockWriter:
    """Collects a batch's points per (series, attempt) and writes blocks and rollups.

    A point is `fresh` when its step is above every step its series had stored:
    its bucket's rollup can be merged. Anything else may replace an older
    attempt's value, so its bucket is recomputed from the blocks.
    """

    def __init__(self, receipt, received_at: float):
        self.receipt = receipt
        self.received_at = received_at
        # Keyed by the series object's identity: new series get their primary key only at write time.
        self.series = {}
        self.pending = defaultdict(list)  # (series, attempt) -> [(step, value, time)]
        self.dirty = defaultdict(set)  # series -> buckets to recompute
        self.fresh = defaultdict(list)  # series -> [(step, value)] merged into rollups

    def add(self, series, attempt, step, value, when, fresh):
        key = id(series)
        self.series[key] = series
        self.pending[(key, attempt)].append((step, value, when))
        if fresh:
            self.fresh[key].append((step, value))
        else:
            self.dirty[key].add(step // ROLLUP_WIDTH)

    def write(self):
        blocks = []
        for (key, attempt), points in self.pending.items():
            series = self.series[key]
            points.sort(key=lambda p: p[0])
            steps = np.fromiter((p[0] for p in points), dtype=np.int64, count=len(points))
            values = np.fromiter((p[1] for p in points), dtype=np.float64, count=len(points))
            times = None
            if any(p[2] is not None for p in points):
                times = np.fromiter(
                    (self.received_at if p[2] is None else p[2] for p in points), dtype=np.float64, count=len(points)
                )
            summary = Summary.of(steps, values)
            blocks.append(
                Block(
                    series=series,
                    attempt=attempt,
                    first_step=int(steps[0]),
                    last_step=int(steps[-1]),
                    count=summary.count,
                    nonfinite_count=summary.nonfinite_count,
                    min_value=summary.min_value,
                    max_value=summary.max_value,
                    receipt=self.receipt,
                    data=pack(steps, values, times),
                )
            )
        Block.objects.bulk_create(blocks, batch_size=500)
        self._write_rollups()

    def _write_rollups(self):
        merged = {}  # (series_id, bucket) -> Summary of fresh points
        for key, points in self.fresh.items():
            series = self.series[key]
            by_bucket = defaultdict(list)
            for step, value in points:
                bucket = step // ROLLUP_WIDTH
                if bucket not in self.dirty.get(key, ()):
                    by_bucket[bucket].append((step, value))
            for bucket, items in by_bucket.items():
                steps = np.array([s for s, _ in items], dtype=np.int64)
                values = np.array([v for _, v in items], dtype=np.float64)
                merged[(series.id, bucket)] = Summary.of(steps, values)
        rows = {}
        if merged:
            condition = Q()
            for series_id in {sid for sid, _ in merged}:
                buckets = [b for sid, b in merged if sid == series_id]
                condition |= Q(series_id=series_id, bucket__gte=min(buckets), bucket__lte=max(buckets))
            existing = {(r.series_id, r.bucket): r for r in Rollup.objects.filter(condition)}
            for key, summary in merged.items():
                if key in existing:
                    summary = _rollup_summary(existing[key]).merge(summary)
                rows[key] = summary
        for key, buckets in self.dirty.items():
            series = self.series[key]
            for bucket, summary in recompute_buckets(series, buckets).items():
                rows[(series.id, bucket)] = summary
        Rollup.objects.bulk_create(
            [
                Rollup(
                    series_id=sid,
                    bucket=bucket,
                    count=s.count,
                    nonfinite_count=s.nonfinite_count,
                    min_value=s.min_value,
                    max_value=s.max_value,
                    last_step=s.last_step,
                    last_value=db_float(s.last_value),
                )
                for (sid, bucket), s in rows.items()
            ],
            update_conflicts=True,
            unique_fields=["series", "bucket"],
            update_fields=["count", "nonfinite_count", "min_value", "max_value", "last_step", "last_value"],
            batch_size=500,
        )


def _rollup_summary(row: Rollup) -> Summary:
    return Summary(
        count=row.count,
        nonfinite_count=row.nonfinite_count,
        min_value=row.min_value,
        max_value=row.max_value,
        last_step=row.last_step,
        last_value=from_db_float(row.last_value),
    )


def recompute_buckets(series, buckets) -> dict[int, Summary]:
    """Summaries of whole buckets, rebuilt from every attempt's blocks."""
    start = min(buckets) * ROLLUP_WIDTH
    end = (max(buckets) + 1) * ROLLUP_WIDTH - 1
    steps, values, _ = read_points(series, start=start, end=end)
    bucket_of = steps // ROLLUP_WIDTH
    result = {}
    for bucket in buckets:
        mask = bucket_of == bucket
        if mask.any():
            result[bucket] = Summary.of(steps[mask], values[mask])
    return result


def stored_steps(series, since: int) -> dict[int, int]:
    """{step: newest attempt} of what the series holds from step `since` on (the out-of-order path)."""
    held = {}
    blocks = Block.objects.filter(series=series, last_step__gte=since).order_by("attempt")
    for attempt, data in blocks.values_list("attempt", "data").iterator(chunk_size=2000):
        steps, _, _ = unpack(data)
        held.update(dict.fromkeys(steps.tolist(), attempt))
    return held


def read_points(series, start=None, end=None, all_attempts=False):
    """Points of one series in step order: (steps, values, attempts) arrays.

    By default only the newest attempt of each step; with all_attempts every
    stored point, ordered by step then attempt.
    """
    blocks = Block.objects.filter(series=series)
    if start is not None:
        blocks = blocks.filter(last_step__gte=start)
    if end is not None:
        blocks = blocks.filter(first_step__lte=end)
    step_parts, value_parts, attempt_parts = [], [], []
    for attempt, data in blocks.values_list("attempt", "data").iterator(chunk_size=2000):
        steps, values, _ = unpack(data)
        step_parts.append(steps)
        value_parts.append(values)
        attempt_parts.append(np.full(len(steps), attempt, dtype=np.int64))
    if not step_parts:
        empty = np.array([], dtype=np.int64)
        return empty, np.array([], dtype=np.float64), empty
    steps = np.concatenate(step_parts)
    values = np.concatenate(value_parts)
    attempts = np.concatenate(attempt_parts)
    keep = np.ones(len(steps), dtype=bool)
    if start is not None:
        keep &= steps >= start
    if end is not None:
        keep &= steps <= end
    steps, values, attempts = steps[keep], values[keep], attempts[keep]
    order = np.lexsort((attempts, steps))
    steps, values, attempts = steps[order], values[order], attempts[order]
    if not all_attempts and len(steps):
        # After sorting by (step, attempt) the newest attempt of a step is the last of its run.
        last_of_step = np.append(steps[1:] != steps[:-1], True)
        steps, values, attempts = steps[last_of_step], values[last_of_step], attempts[last_of_step]
    return steps, values, attempts
