"""The one module that reads and writes stored points.

Layout (see ingest/models.py): a `Block` row per (series, attempt, batch) holds
the points packed and compressed — steps as int64 deltas, values as raw
IEEE-754 doubles (so NaN and ±Infinity round-trip bit for bit on any database),
and, only when the sender gave them, times as int64 microsecond deltas. The
8-byte words are byte-shuffled (every word's first byte, then every second
byte, ...: a series' exponents and high bytes repeat) and LZ4-compressed; blocks
written before that are zlib streams and still read (`unpack` tells them apart
by the first byte). A
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

import lz4.block
import numpy as np
from django.db import connection

from ingest.models import ROLLUP_WIDTH, Block, Rollup

_HEADER = struct.Struct("<BI")
_HAS_TIMES = 1
# A zlib stream's first byte has 8 (deflate) in its low bits, so this can never start an old block.
_SHUFFLED_LZ4 = b"\x01"


def db_float(value: float) -> float | None:
    """NaN is stored as NULL (SQLite turns a NaN REAL into NULL anyway); ±inf are kept."""
    return None if value != value else value


def from_db_float(value: float | None) -> float:
    return math.nan if value is None else value


def _deltas(a: np.ndarray) -> bytes:
    out = np.empty(len(a), dtype="<i8")
    out[0] = a[0]
    np.subtract(a[1:], a[:-1], out=out[1:])
    return out.tobytes()


def pack(steps: np.ndarray, values: np.ndarray, times: np.ndarray | None) -> bytes:
    return packed(len(steps), _deltas(steps), values.astype("<f8").tobytes(),
                  None if times is None else _deltas(_microseconds(times)))


def _microseconds(times: np.ndarray) -> np.ndarray:
    return np.round(times * 1e6).astype(np.int64)


def packed(count: int, step_deltas: bytes, values: bytes, time_deltas: bytes | None) -> bytes:
    """A block's stored bytes from its columns already laid out (8 bytes a point each; see pack).

    Shuffled LZ4, not zlib: on the real logs in data/real-runs 4.15 bytes a point against zlib level 1's 4.50,
    a seventh of the CPU to write and half to read a block (benchmarks/block_codec.py); ingest writes every
    block and evaluation reads every one."""
    columns = [step_deltas, values] if time_deltas is None else [step_deltas, values, time_deltas]
    words = np.frombuffer(b"".join(columns), dtype=np.uint8).reshape(-1, 8)
    return b"".join((_SHUFFLED_LZ4, _HEADER.pack(_HAS_TIMES if time_deltas is not None else 0, count),
                     lz4.block.compress(words.T.tobytes(), store_size=False)))


def _words(data: bytes) -> tuple[int, int, bytes]:
    """flags, point count and the unshuffled columns of a stored block (either layout)."""
    if data[:1] != _SHUFFLED_LZ4:
        raw = zlib.decompress(data)
        flags, n = _HEADER.unpack_from(raw)
        return flags, n, raw[_HEADER.size:]
    flags, n = _HEADER.unpack_from(data, 1)
    size = 8 * n * (3 if flags & _HAS_TIMES else 2)
    shuffled = lz4.block.decompress(data[1 + _HEADER.size:], uncompressed_size=size)
    return flags, n, np.frombuffer(shuffled, dtype=np.uint8).reshape(8, -1).T.tobytes()


def unpack(data: bytes):
    flags, n, raw = _words(bytes(data))
    steps = np.frombuffer(raw, dtype="<i8", count=n).cumsum()
    values = np.frombuffer(raw, dtype="<f8", count=n, offset=8 * n).copy()
    times = None
    if flags & _HAS_TIMES:
        times = np.frombuffer(raw, dtype="<i8", count=n, offset=16 * n).cumsum() / 1e6
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
        """Summary of points; `steps` must be sorted (the last point is the latest step)."""
        finite = np.isfinite(values)
        nfinite = int(np.count_nonzero(finite))
        kept = values if nfinite == len(values) else values[finite]
        return cls(
            count=len(values),
            nonfinite_count=len(values) - nfinite,
            min_value=float(kept.min()) if nfinite else None,
            max_value=float(kept.max()) if nfinite else None,
            last_step=int(steps[-1]),
            last_value=float(values[-1]),
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

    A point is `fresh` when its series held no value at its step before: its
    bucket's rollup is merged in SQL. A point that replaces an older attempt's
    value makes its bucket `dirty`: recomputed from the blocks.
    """

    def __init__(self, receipt, received_at: float):
        self.receipt = receipt
        self.received_at = received_at
        # Keyed by the series object's identity: new series get their primary key only at write time.
        self.pending = {}  # (id(series), attempt) -> [series, points, fresh flags]
        self.dirty = defaultdict(set)  # id(series) -> buckets to recompute
        self.columns = None  # add_fresh_columns

    def add_fresh_columns(self, series_list, attempt, steps, values, times, bounds):
        """Every series' points of this batch at once, none of them stored before: arrays ordered by series
        then step, series i's points at [bounds[i], bounds[i + 1]); `times` is NaN where a point gave none.

        Their blocks and summaries are computed a column at a time (_fresh_blocks): the same rows as one
        add per series, without a few dozen numpy calls for each series."""
        self.columns = (list(series_list), attempt, steps, values, times, bounds)

    def holds(self, attempt) -> bool:
        """Whether points of `attempt` are waiting to be written."""
        return (self.columns is not None and self.columns[1] == attempt) or any(a == attempt for _, a in self.pending)

    def add(self, series, attempt, point, fresh):
        entry = self.pending.get((id(series), attempt))
        if entry is None:
            entry = self.pending[(id(series), attempt)] = [series, [], []]
        entry[1].append(point)
        entry[2].append(fresh)
        if not fresh:
            self.dirty[id(series)].add(point[0] // ROLLUP_WIDTH)

    def write(self) -> list:
        """Writes the blocks (add_fresh_columns' first, then add's); answers the rollup statements [(sql, params)],
        for the caller to send with its own (execute_together): nothing reads their results."""
        blocks = []
        merges = {}  # (series, bucket) -> Summary of fresh points
        # A batch's points take one way or the other (ingest/service.py), so no bucket is in both.
        assert self.columns is None or not self.pending
        fresh_parts = self._fresh_blocks(blocks) if self.columns is not None else []
        for (key, attempt), (series, points, flags) in self.pending.items():
            columns = tuple(zip(*points))
            steps = np.array(columns[0], dtype=np.int64)
            values = np.array(columns[3], dtype=np.float64)
            n = len(steps)
            times = None
            missing = columns[4].count(None)
            if missing == 0:
                times = np.array(columns[4], dtype=np.float64)
            elif missing < n:
                received = self.received_at
                times = np.array([received if t is None else t for t in columns[4]], dtype=np.float64)
            fresh = np.array(flags, dtype=bool)
            if n > 1 and np.any(steps[1:] < steps[:-1]):
                order = np.argsort(steps, kind="stable")
                steps, values, fresh = steps[order], values[order], fresh[order]
                times = times[order] if times is not None else None
            summary = Summary.of(steps, values)
            blocks.append((series.pk, attempt, int(steps[0]), int(steps[-1]), summary.count, summary.nonfinite_count,
                           summary.min_value, summary.max_value, self.receipt.pk, pack(steps, values, times)))
            buckets = steps // ROLLUP_WIDTH
            if self.dirty.get(key):
                fresh &= ~np.isin(buckets, list(self.dirty[key]))
            if not fresh.any():
                continue
            if buckets[0] == buckets[-1] and fresh.all():
                # The usual case: the block lies in one bucket, so its summary is the bucket's part.
                merge_key = (series, int(buckets[0]))
                merges[merge_key] = merges[merge_key].merge(summary) if merge_key in merges else summary
                continue
            steps, values, buckets = steps[fresh], values[fresh], buckets[fresh]
            cuts = np.flatnonzero(buckets[1:] != buckets[:-1]) + 1
            for lo, hi in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(steps)]))):
                merge_key = (series, int(buckets[lo]))
                part = Summary.of(steps[lo:hi], values[lo:hi])
                merges[merge_key] = merges[merge_key].merge(part) if merge_key in merges else part
        _insert_blocks(blocks)
        replaced = []
        for key, buckets in self.dirty.items():
            series = next(entry[0] for (k, _), entry in self.pending.items() if k == key)
            replaced += [(series.pk, bucket, summary) for bucket, summary in recompute_buckets(series, buckets).items()]
        return (_merge_rollups(fresh_parts + [(series.pk, bucket, summary) for (series, bucket), summary in merges.items()])
                + _replace_rollups(replaced))

    def _fresh_blocks(self, blocks) -> list:
        """add_fresh_columns' blocks (one a series), added to `blocks` as write() makes them a block at a time;
        answers their buckets' summaries [(series id, bucket, Summary)], one a series and bucket."""
        series_list, attempt, steps, values, times, bounds = self.columns
        n = len(steps)
        starts = np.array(bounds[:-1], dtype=np.intp)
        ends = np.array(bounds[1:], dtype=np.intp)
        missing = np.isnan(times)
        untimed = np.add.reduceat(missing, starts, dtype=np.int64).tolist()
        counts = (ends - starts).tolist()
        kept = np.where(missing, self.received_at, times) if untimed and any(untimed) else times
        step_bytes = _block_deltas(steps, starts).tobytes()
        value_bytes = values.astype("<f8").tobytes()
        time_bytes = _block_deltas(_microseconds(kept), starts).tobytes()
        block_sums = _summaries(steps, values, starts, ends)
        receipt_id = self.receipt.pk
        ids = [series.pk for series in series_list]
        for series_id, first, lo, hi, count, none_timed, summary in zip(ids, steps[starts].tolist(), starts.tolist(),
                                                                       ends.tolist(), counts, untimed, block_sums):
            data = packed(count, step_bytes[8 * lo:8 * hi], value_bytes[8 * lo:8 * hi],
                          time_bytes[8 * lo:8 * hi] if none_timed < count else None)
            blocks.append((series_id, attempt, first, summary.last_step, summary.count, summary.nonfinite_count,
                           summary.min_value, summary.max_value, receipt_id, data))
        # A bucket's part of a block: the block cut where the bucket changes (a block of one bucket is one part).
        buckets = steps // ROLLUP_WIDTH
        cuts = np.union1d(starts, np.flatnonzero(buckets[1:] != buckets[:-1]) + 1)
        cut_ends = np.append(cuts[1:], n)
        owner = (np.searchsorted(starts, cuts, side="right") - 1).tolist()
        return [(ids[index], bucket, summary)
                for index, bucket, summary in zip(owner, buckets[cuts].tolist(), _summaries(steps, values, cuts, cut_ends))]


def _block_deltas(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """_deltas of each block of `a` (blocks beginning at `starts`) in one array: a block's first value is kept whole."""
    out = np.empty(len(a), dtype="<i8")
    np.subtract(a[1:], a[:-1], out=out[1:])
    out[starts] = a[starts]
    return out


def _summaries(steps, values, starts, ends) -> list[Summary]:
    """Summary.of each part [starts[i], ends[i]) of `steps` and `values` (parts cover the arrays, in order)."""
    finite = np.isfinite(values)
    nfinite = np.add.reduceat(finite, starts, dtype=np.int64).tolist()
    lows = np.minimum.reduceat(np.where(finite, values, np.inf), starts).tolist()
    highs = np.maximum.reduceat(np.where(finite, values, -np.inf), starts).tolist()
    counts = (ends - starts).tolist()
    last_steps = steps[ends - 1].tolist()
    last_values = values[ends - 1].tolist()
    return [Summary(count, count - nf, low if nf else None, high if nf else None, last_step, last_value)
            for count, nf, low, high, last_step, last_value in zip(counts, nfinite, lows, highs, last_steps, last_values)]


_BLOCK_COLUMNS = ("series_id", "attempt", "first_step", "last_step", "count", "nonfinite_count", "min_value", "max_value", "receipt_id", "data")
_BLOCK_TYPES = ("bigint", "integer", "bigint", "bigint", "integer", "integer", "double precision", "double precision", "bigint", "bytea")


def _insert_blocks(rows):
    """Rows of _BLOCK_COLUMNS. Binary COPY on PostgreSQL: a batch's blocks are tens of kilobytes of
    bytea, which COPY's text format would double into hex, and an INSERT would build and parse
    hundreds of parameters (measured: ~8 ms of a 5,000-point batch)."""
    if connection.vendor != "postgresql":
        Block.objects.bulk_create([Block(**dict(zip(_BLOCK_COLUMNS, row))) for row in rows], batch_size=500)
        return
    table = connection.ops.quote_name(Block._meta.db_table)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({', '.join(_BLOCK_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_BLOCK_TYPES)
            for row in rows:
                copy.write_row(row)


_ROLLUP_COLUMNS = "series_id, bucket, count, nonfinite_count, min_value, max_value, last_step, last_value"


def _rollup_params(rows):
    params = []
    for series_id, bucket, s in rows:
        params += [series_id, bucket, s.count, s.nonfinite_count, s.min_value, s.max_value, s.last_step, db_float(s.last_value)]
    return params


def _merge_rollups(rows) -> list:
    """The upsert adding fresh points' summaries to their buckets: no read-modify-write."""
    t = connection.ops.quote_name(Rollup._meta.db_table)
    least, greatest = ("LEAST", "GREATEST") if connection.vendor == "postgresql" else ("MIN", "MAX")
    return _upsert_rollups(rows, f"""
        count = {t}.count + excluded.count,
        nonfinite_count = {t}.nonfinite_count + excluded.nonfinite_count,
        min_value = {least}(COALESCE({t}.min_value, excluded.min_value), COALESCE(excluded.min_value, {t}.min_value)),
        max_value = {greatest}(COALESCE({t}.max_value, excluded.max_value), COALESCE(excluded.max_value, {t}.max_value)),
        last_value = CASE WHEN excluded.last_step >= {t}.last_step THEN excluded.last_value ELSE {t}.last_value END,
        last_step = {greatest}({t}.last_step, excluded.last_step)""")


def _replace_rollups(rows) -> list:
    """The upsert by which buckets recomputed from the blocks replace what was there."""
    columns = ("count", "nonfinite_count", "min_value", "max_value", "last_step", "last_value")
    return _upsert_rollups(rows, ", ".join(f"{c} = excluded.{c}" for c in columns))


def _upsert_rollups(rows, on_conflict_set) -> list:
    table = connection.ops.quote_name(Rollup._meta.db_table)
    statements = []
    if rows and connection.vendor == "postgresql":
        # One array per column: a short statement whatever the row count, parsed once by the driver.
        arrays = "%s::bigint[], %s::bigint[], %s::integer[], %s::integer[], %s::double precision[], " \
                 "%s::double precision[], %s::bigint[], %s::double precision[]"
        columns = zip(*[(series_id, bucket, s.count, s.nonfinite_count, s.min_value, s.max_value, s.last_step,
                         db_float(s.last_value)) for series_id, bucket, s in rows])
        params = [array_literal(column) for column in columns]
        statements.append((f"INSERT INTO {table} ({_ROLLUP_COLUMNS}) SELECT * FROM unnest({arrays}) "
                           f"ON CONFLICT (series_id, bucket) DO UPDATE SET {on_conflict_set}", params))
        rows = []
    for start in range(0, len(rows), 500):  # stay under the databases' bound-parameter limits
        chunk = rows[start : start + 500]
        values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
        statements.append((f"INSERT INTO {table} ({_ROLLUP_COLUMNS}) VALUES {values} "
                           f"ON CONFLICT (series_id, bucket) DO UPDATE SET {on_conflict_set}", _rollup_params(chunk)))
    return statements


def array_literal(values) -> str:
    """A PostgreSQL array literal of numbers (None as NULL) for a `%s::type[]` parameter.

    The driver's own list adaptation, on the client-side binding Django uses, costs more than
    the statements it serves (measured: ~2 ms a 5,000-point batch for a dozen 54-element arrays).
    Every element is made a number here (repr keeps a double exact, and PostgreSQL reads its nan, inf and
    -inf), so nothing else can ever reach the literal: a string would raise instead of adding elements.
    Columns of plain ints or plain floats (the usual ones) are written without a check per element.
    """
    values = values if isinstance(values, (list, tuple)) else list(values)
    kinds = set(map(type, values))
    if kinds == {int}:
        return "{" + ",".join(map(int.__repr__, values)) + "}"
    if kinds == {float}:
        return "{" + ",".join(map(float.__repr__, values)) + "}"
    return "{" + ",".join("NULL" if v is None else _number(v) for v in values) + "}"


def _number(value) -> str:
    return str(int(value)) if isinstance(value, (int, np.integer)) else repr(float(value))


def _one_string(statements) -> bool:
    """Whether statements can travel as one string: Django's psycopg cursor binds parameters on the client
    (unless told otherwise), so PostgreSQL takes several in one simple query; SQLite is in-process anyway."""
    return connection.vendor == "postgresql" and not connection.settings_dict["OPTIONS"].get("server_side_binding")


def read_together(statements) -> list[list[tuple]]:
    """Statements [(sql, params)], in order and in one round trip on PostgreSQL: each one's rows
    ([] for a statement that answers none)."""
    with connection.cursor() as cursor:
        if not _one_string(statements):
            answers = []
            for sql, params in statements:
                cursor.execute(sql, params)
                answers.append(cursor.fetchall() if cursor.description else [])
            return answers
        cursor.execute("; ".join(sql for sql, _ in statements), [p for _, params in statements for p in params])
        answers = [cursor.fetchall() if cursor.description else []]
        while cursor.nextset():
            answers.append(cursor.fetchall() if cursor.description else [])
        return answers


def execute_together(statements):
    """Statements [(sql, params)] whose results nobody reads, in one round trip on PostgreSQL (read_together)."""
    if statements:
        read_together(statements)


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


def _blocks_in(blocks, start, end):
    """Blocks that may hold steps in [start, end]."""
    if start is not None:
        blocks = blocks.filter(last_step__gte=start)
    if end is not None:
        blocks = blocks.filter(first_step__lte=end)
    return blocks


def _in_step_order(steps, values, attempts, start, end, all_attempts=False):
    """Concatenated block contents cut to [start, end], in (step, attempt) order; by default the newest attempt of each step."""
    steps, values, attempts = np.concatenate(steps), np.concatenate(values), np.concatenate(attempts)
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


def _nothing():
    empty = np.array([], dtype=np.int64)
    return empty, np.array([], dtype=np.float64), empty


def read_point_times(series, start=None, end=None):
    """(steps, times) of one series' newest attempt of each step, times in Unix seconds.

    A point sent without a time has its batch's time of receipt (as the contract says); a block that
    stored no times at all takes its receipt's time for every point.
    """
    blocks = _blocks_in(Block.objects.filter(series=series), start, end)
    step_parts, time_parts, attempt_parts = [], [], []
    for attempt, data, received in blocks.values_list("attempt", "data", "receipt__received_at").iterator(chunk_size=2000):
        steps, _, times = unpack(data)
        step_parts.append(steps)
        time_parts.append(times if times is not None else np.full(len(steps), received.timestamp()))
        attempt_parts.append(np.full(len(steps), attempt, dtype=np.int64))
    if not step_parts:
        return _nothing()[:2]
    steps, times, _ = _in_step_order(step_parts, time_parts, attempt_parts, start, end)
    return steps, times


def _rows(queryset, stream):
    """The queryset's rows, streamed in chunks (a server-side cursor on PostgreSQL: memory stays flat however
    long the span) or, for a read known to be short, fetched at once: one round trip instead of a cursor's
    four, which evaluation's few-step reads pay every batch."""
    return queryset.iterator(chunk_size=2000) if stream else queryset


def read_points_of_many(series_list, start=None, end=None, stream=True, besides=None) -> dict:
    """read_points for several series in one query: {series id: (steps, values, attempts)}, newest attempt of each step.

    `besides`, (batch ids, {series id: [(attempt, steps, values)]}): those batches' blocks are not read but taken
    as given, every block they stored of those series (evaluation has its own batches unpacked already)."""
    blocks = _blocks_in(Block.objects.filter(series__in=list(series_list)), start, end)
    if besides is not None:
        blocks = blocks.exclude(receipt_id__in=list(besides[0]))
    parts = defaultdict(lambda: ([], [], []))

    def add(series_id, attempt, steps, values):
        into = parts[series_id]
        into[0].append(steps)
        into[1].append(values)
        into[2].append(np.full(len(steps), attempt, dtype=np.int64))

    for series_id, attempt, data in _rows(blocks.values_list("series_id", "attempt", "data"), stream):
        steps, values, _ = unpack(data)
        add(series_id, attempt, steps, values)
    for series_id, pieces in (besides[1].items() if besides is not None else ()):
        for attempt, steps, values in pieces:  # after the stored ones: the newest blocks, as a read lists them
            add(series_id, attempt, steps, values)
    out = {}
    for s in series_list:
        sid = getattr(s, "pk", s)
        out[sid] = _in_step_order(*parts[sid], start, end) if sid in parts else _nothing()
    return out


def read_points(series, start=None, end=None, all_attempts=False, stream=True):
    """Points of one series in step order: (steps, values, attempts) arrays.

    By default only the newest attempt of each step; with all_attempts every
    stored point, ordered by step then attempt. `stream=False` for a span known to be short (_rows).
    """
    blocks = _blocks_in(Block.objects.filter(series=series), start, end)
    step_parts, value_parts, attempt_parts = [], [], []
    for attempt, data in _rows(blocks.values_list("attempt", "data"), stream):
        steps, values, _ = unpack(data)
        step_parts.append(steps)
        value_parts.append(values)
        attempt_parts.append(np.full(len(steps), attempt, dtype=np.int64))
    if not step_parts:
        return _nothing()
    return _in_step_order(step_parts, value_parts, attempt_parts, start, end, all_attempts)
