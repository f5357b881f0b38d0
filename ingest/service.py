"""Store one validated batch: one transaction under the run's ingest lock, announced after commit (ingest/signals.py)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

import numpy as np

from ingest.contract import Batch, PointColumns, layer_for_metric, phase_kind
from ingest.models import CATCH_ALL_SUFFIX
from ingest.models import Attempt, AttemptReason, BatchReceipt, Block, Event, IdentityChange, Phase, Run, Series
from ingest.rows import Selection
from ingest.signals import announce_batch_stored, requested_actions
from ingest.storage import BlockWriter, array_literal, db_float, execute_together, read_together, stored_steps
from opsconsole import metrics

log = logging.getLogger(__name__)

IDENTITY_FIELDS = ("name", "code_rev", "data_snapshot", "config", "budget", "tags")
INGEST_OWNED_FIELDS = ("attempt", "attempt_max_step", "max_step", "last_seen_at")


class RunOfAnotherProject(Exception):
    """The run id is taken by another project: this token may not write to it (HTTP 403)."""


@dataclass
class IngestResult:
    run_id: str
    points: int
    events: int
    phases: int
    duplicate: bool
    receipt_id: int
    run_pk: int
    actions: list = field(default_factory=list)

    def as_response(self):
        return {
            "run": self.run_id,
            "accepted": {"points": self.points, "events": self.events, "phases": self.phases},
            "duplicate": self.duplicate,
            "actions": self.actions,
        }


def ingest_batch(project, batch: Batch, *, now=None) -> IngestResult:
    result = _store_batch(project, batch, now or timezone.now())
    # One round trip to the metrics store a batch: this is ingest's hot path.
    stored = {"ingest_points": result.points, "ingest_events": result.events} if not result.duplicate else {}
    metrics.count_many({"ingest_batches": 1, **stored}, project=project,
                       labels={"ingest_batches": {"result": "duplicate" if result.duplicate else "stored"}})
    result.actions = requested_actions(project, result.run_pk)
    return result


def _store_batch(project, batch: Batch, now) -> IngestResult:
    with transaction.atomic():
        lo, hi = batch.step_range()
        receipt = BatchReceipt(
            batch_id=batch.batch_id,
            received_at=now,
            queued_at=now,  # handed to evaluation as the transaction commits; queue_evaluation unmarks it if that fails
            points=len(batch.points),
            events=len(batch.events),
            phases=len(batch.phases),
            min_step=lo,
            max_step=hi,
        )
        opened = _lock_run(project, batch, now, receipt)
        run = opened.run
        if not opened.new:
            seen = BatchReceipt.objects.get(run=run, batch_id=batch.batch_id)
            return IngestResult(run.run_id, seen.points, seen.events, seen.phases, True, seen.id, run.pk)
        arrival_steps = [e.step for e in batch.events] + [ph.step for ph in batch.phases]
        if receipt.min_step is not None:
            arrival_steps.append(receipt.min_step)
        changed = _update_identity(run, batch.run, receipt, min(arrival_steps, default=run.max_step), now)
        statements = _store_telemetry(run, batch, receipt, now, opened.series)
        run.last_seen_at = now
        # Only what ingest owns: status and last_step belong to evaluation, which may write them meanwhile.
        if changed:
            run.save(update_fields=[*INGEST_OWNED_FIELDS, *changed])
        else:
            statements.append(_run_progress(run))
        execute_together(statements)
        transaction.on_commit(lambda: announce_batch_stored(receipt.id), robust=True)
    return IngestResult(run.run_id, receipt.points, receipt.events, receipt.phases, False, receipt.id, run.pk)


@dataclass
class _Opened:
    run: Run
    new: bool  # the receipt was inserted: False for a batch_id the run already holds (a re-sent batch)
    series: list | None  # the run's series, when read with the rest (None: read them when needed)


def _receipt_insert(receipt, run_by_id=None) -> tuple[str, list]:
    """The statement inserting the receipt unless the run already holds its batch_id (a re-sent batch),
    answering its id: one statement is both the idempotency check and the insert, and the run's ingest
    lock makes it race-free. With `run_by_id` (the run's id as the sender names it) the run is found by
    the statement itself, which inserts nothing when there is no such run."""
    fields = [f for f in BatchReceipt._meta.concrete_fields if not f.primary_key]
    qn = connection.ops.quote_name
    params = [f.get_db_prep_save(getattr(receipt, f.attname), connection) for f in fields if f.attname != "run_id"]
    columns = ", ".join(qn(f.column) for f in fields)
    if run_by_id is None:
        values = f"VALUES ({', '.join(['%s'] * len(fields))})"
        params.insert([f.attname for f in fields].index("run_id"), receipt.run_id)
    else:
        runs = qn(Run._meta.db_table)
        values = (f"SELECT {', '.join('r.id' if f.attname == 'run_id' else '%s' for f in fields)} FROM {runs} AS r "
                  "WHERE r.run_id = %s")
        params.append(run_by_id)
    sql = (f"INSERT INTO {qn(BatchReceipt._meta.db_table)} ({columns}) {values} "
           "ON CONFLICT (run_id, batch_id) WHERE batch_id IS NOT NULL DO NOTHING RETURNING id")
    return sql, params


def _receipt_inserted(receipt, row) -> bool:
    if row is None:
        return False
    receipt.pk = row[0]
    receipt._state.adding = False
    return True


def _insert_receipt(receipt) -> bool:
    """Insert the receipt unless the run already holds its batch_id: False then (see _receipt_insert)."""
    with connection.cursor() as cursor:
        cursor.execute(*_receipt_insert(receipt))
        return _receipt_inserted(receipt, cursor.fetchone())


# What locked_run reads of a run, by the identity JSON fields it leaves unread.
_RUNS: dict[tuple, Selection] = {}


def locked_run(project, batch: Batch, now) -> Run:
    """The run, with this transaction holding the run's ingest lock until it commits.

    Batches of one run are stored one at a time (attempts and rewinds depend on
    order). On PostgreSQL the lock is a transaction-level advisory lock keyed
    by the run id's hash, not the run's row, so evaluation can update the row's status
    while a batch is being stored; SQLite's IMMEDIATE transactions serialize
    all writers anyway.
    """
    return _lock_run(project, batch, now).run


def _lock_run(project, batch: Batch, now, receipt=None) -> _Opened:
    """locked_run; with a `receipt`, also inserted for the run (see _receipt_insert) and the run's series read,
    in the same round trip."""
    run_id = batch.run_id
    if run_id.endswith(CATCH_ALL_SUFFIX) and run_id != project.catch_all_run_id:
        # Another project's catch-all (or one of a project not created yet): taking it first would
        # lock that project's Alertmanager alerts out of their own run.
        raise RunOfAnotherProject(run_id)
    # Identity JSON the batch does not send is neither compared nor saved: left unread (config may be 256 KiB).
    unsent = [name for name in ("config", "budget", "tags") if batch.run.get(name) is None]
    selection = _RUNS.get(tuple(unsent)) or _RUNS.setdefault(tuple(unsent), Selection(Run, leave_out=unsent))
    run_table = selection.table()
    # Run.objects.filter(run_id=run_id).defer(*unsent).first(), without building the query (ingest/rows.py).
    read_sql = f"SELECT {selection.columns()} FROM {run_table} WHERE {run_table}.run_id = %s ORDER BY {run_table}.id ASC LIMIT 1"
    statements = [(read_sql, [run_id])]
    if receipt is not None:
        # The receipt and the series name the run by its id: a run not created yet inserts no receipt and has no series.
        statements += [_receipt_insert(receipt, run_by_id=run_id),
                       (f"SELECT {_SERIES.columns()} FROM {_SERIES.table()} "
                        f"WHERE {_SERIES.table()}.run_id = (SELECT id FROM {run_table} WHERE run_id = %s)", [run_id])]
    locked = connection.vendor == "postgresql"
    if locked:
        # Keyed by the id's hash, so the lock comes before the run's row is even read:
        # concurrent first batches of a new run queue here instead of racing to create it.
        # It travels with what follows it, in order, so that sees what the lock's last holder committed.
        statements.insert(0, ("SELECT pg_advisory_xact_lock(hashtext(%s))", [run_id]))
    results = read_together(statements)[1 if locked else 0:]
    found = selection.instances(results[0])
    run = found[0] if found else None
    new = series = None
    if receipt is not None and run is not None:
        new = _receipt_inserted(receipt, results[1][0] if results[1] else None)
        series = _SERIES.instances(results[2])
    if run is None:
        try:
            with transaction.atomic():
                run = Run.objects.create(project=project, run_id=run_id, last_seen_at=now)
                Attempt.objects.create(run=run, number=1, reason=AttemptReason.FIRST, started_at=now)
        except IntegrityError:
            run = Run.objects.get(run_id=run_id)  # created meanwhile (SQLite: another process)
    if run.project_id != project.id:
        raise RunOfAnotherProject(run_id)
    if receipt is not None:
        receipt.run = run
        if new is None:
            new = _insert_receipt(receipt)
    return _Opened(run, new, series)


def _run_progress(run: Run):
    """The statement saving what ingest owns of the run (INGEST_OWNED_FIELDS), sent with the batch's last ones."""
    fields = [Run._meta.get_field(name) for name in INGEST_OWNED_FIELDS]
    qn = connection.ops.quote_name
    return (f"UPDATE {qn(Run._meta.db_table)} SET {', '.join(f'{qn(f.column)} = %s' for f in fields)} WHERE id = %s",
            [*(f.get_db_prep_save(getattr(run, f.attname), connection) for f in fields), run.pk])


def _update_identity(run: Run, sent: dict, receipt, step, now) -> list[str]:
    """Identity fields the batch changes, set on `run`; a change of a field that held a value is kept as a row."""
    changes = []
    changed = []
    for name in IDENTITY_FIELDS:
        if name not in sent or sent[name] is None:
            continue
        old = getattr(run, name)
        new = sent[name]
        if old == new:
            continue
        if old not in (None, "", {}):
            # A change of what the run *is* is evidence: keep it as a row, never overwrite silently.
            changes.append(IdentityChange(run=run, field=name, old=old, new=new, step=step, changed_at=now, receipt=receipt))
        setattr(run, name, new)
        changed.append(name)
    IdentityChange.objects.bulk_create(changes)
    return changed


class _AttemptTracker:
    def __init__(self, run: Run, now):
        self.run = run
        self.now = now
        self.current = None  # the run's current Attempt once this batch needed it

    def start(self, start_step, reason):
        run = self.run
        run.attempt += 1
        self.current = Attempt.objects.create(
            run=run,
            number=run.attempt,
            reason=reason,
            start_step=start_step,
            previous_max_step=run.attempt_max_step,
            started_at=self.now,
        )
        run.attempt_max_step = None

    def opened_by_a_resent_step(self, step):
        """The current attempt if a re-sent step opened it, at `step` or later, and no restart phase has claimed it."""
        if self.current is None or self.current.number != self.run.attempt:
            self.current = Attempt.objects.filter(run=self.run, number=self.run.attempt).first()
        current = self.current
        if current is None or current.reason != AttemptReason.RESENT_STEP or current.start_step is None:
            return None
        return current if current.start_step >= step else None

    def claim(self, attempt, step):
        """A restart phase at `step` declares `attempt`, already open: it starts there and is the job's restart."""
        attempt.reason = AttemptReason.RESTART_PHASE
        attempt.start_step = min(attempt.start_step, step)
        attempt.save(update_fields=["reason", "start_step"])

    def saw(self, step):
        run = self.run
        if run.attempt_max_step is None or step > run.attempt_max_step:
            run.attempt_max_step = step
        if run.max_step is None or step > run.max_step:
            run.max_step = step


def _point_arrays(points):
    """A batch's points as arrays grouped by series: (keys, steps, values, times, bounds, repeats, layers).

    Points are ordered by series (first appearance) then step; series i's are [bounds[i], bounds[i+1]).
    Times are NaN where a point gave none; `repeats` says some series holds a step twice;
    `layers` maps a series key to the last layer its points named.
    """
    layers = {}
    if isinstance(points, PointColumns):
        steps, metrics, components, values, times = (points.steps, points.metrics, points.components, points.values,
                                                     points.times)
    else:
        steps, metrics, components, values, times, sent_layers = zip(*points)
        steps = np.array(steps, dtype=np.int64)
        values = np.array(values, dtype=np.float64)
        times = np.array(times, dtype=np.float64)  # None becomes NaN
        if any(sent_layers):
            layers = {(m, c): layer for m, c, layer in zip(metrics, components, sent_layers) if layer}
    index, codes = _series_codes(metrics, components)
    order = np.lexsort((steps, codes))
    codes, steps, values, times = codes[order], steps[order], values[order], times[order]
    repeats = bool(np.any((codes[1:] == codes[:-1]) & (steps[1:] == steps[:-1])))
    bounds = np.searchsorted(codes, np.arange(len(index) + 1)).tolist()
    return list(index), steps, values, times, bounds, repeats, layers


def _series_codes(metrics, components):
    """({(metric, component): code}, each point's code): codes number the series in order of first appearance."""
    period = _period(metrics, components)
    if period:
        index = {key: code for code, key in enumerate(zip(metrics[:period], components[:period]))}
        if len(index) == period:
            return index, np.arange(len(metrics), dtype=np.int64) % period
    index = {key: code for code, key in enumerate(dict.fromkeys(zip(metrics, components)))}
    return index, np.fromiter(map(index.__getitem__, zip(metrics, components)), dtype=np.int64, count=len(metrics))


def _period(metrics, components, tries=256) -> int | None:
    """k when point i is of the same series as point i - k throughout (and k is the least such), else None.

    A job logs the same series step after step, so a batch usually repeats one sequence of series: its
    series and their codes then come from the first k points, without a tuple and a hash for every point.
    """
    k = 0
    for _ in range(tries):
        try:
            k = metrics.index(metrics[0], k + 1)
        except ValueError:
            return None
        if components[k] == components[0]:
            break
    else:
        return None
    if metrics[k:] != metrics[:-k] or components[k:] != components[:-k]:
        return None
    return k


def _store_telemetry(run: Run, batch: Batch, receipt, now, series=None) -> list:
    """Stores the batch's points, phases and events (`series`: the run's, if already read); answers the
    statements left to send [(sql, params)]: the series' progress and the rollups, which nothing reads before commit."""
    received_at = now.timestamp()
    attempts = _AttemptTracker(run, now)
    series_by_key = {(s.metric, s.component): s for s in (_series_of(run) if series is None else series)}
    keys, steps, values, times, bounds, repeats, layers = _point_arrays(batch.points) if len(batch.points) else (
        [], None, None, None, [0], False, {})
    new_series = {}
    for key in keys:
        layer = layers.get(key)
        series = series_by_key.get(key)
        if series is None:
            series = Series(run=run, metric=key[0], component=key[1], layer=layer or layer_for_metric(key[0]))
            series_by_key[key] = new_series[key] = series
        elif layer:
            series.layer = layer

    writer = BlockWriter(receipt, received_at)
    phase_rows = []
    phases = sorted(batch.phases, key=lambda p: p.position)
    next_phase = 0

    def apply_phases(upto):
        nonlocal next_phase
        while next_phase < len(phases) and phases[next_phase].position <= upto:
            ph = phases[next_phase]
            next_phase += 1
            # A restart begins a new attempt once the current one holds data, unless another sender of the job
            # already began it.
            if ph.phase == "restart" and run.attempt_max_step is not None and not already_resumed(ph.step):
                attempts.start(ph.step, AttemptReason.RESTART_PHASE)
            phase_rows.append(
                Phase(
                    run=run,
                    step=ph.step,
                    phase=ph.phase,
                    kind=phase_kind(ph.phase),
                    time=ph.time if ph.time is not None else received_at,
                    attempt=run.attempt,
                    receipt=receipt,
                )
            )

    def already_resumed(step):
        """Whether a restart phase at `step` announces the attempt another process of the same job already opened.

        With per-rank signals every rank of a resumed job re-sends its own series, and rank 0 alone announces the
        restart: a rank's re-sent step that reaches the console first opens the new attempt. The phase is that
        resume's, not a second one, when that attempt began at or after the phase's step and none of this
        batch's series has sent anything in it yet (a sender that rewinds what it sent in this attempt restarts
        again). The attempt is then the phase's: a later restart phase begins a new one."""
        current = attempts.opened_by_a_resent_step(step)
        if current is None or writer.holds(run.attempt):
            return False
        mine = [series_by_key[key].pk for key in keys if series_by_key[key].pk is not None]
        if mine and Block.objects.filter(series_id__in=mine, attempt=run.attempt).exists():
            return False
        attempts.claim(current, step)
        return True

    spans = {key: (bounds[i], bounds[i + 1]) for i, key in enumerate(keys)}
    if not repeats and not any(ph.phase == "restart" for ph in phases) and _only_new_steps(series_by_key, spans, steps):
        # The common case: no step of this batch was stored before, so none is a re-send.
        apply_phases(len(batch.points))
        fresh = [series_by_key[key] for key in keys]
        last_steps = latest = []
        if fresh:
            writer.add_fresh_columns(fresh, run.attempt, steps, values, times, bounds)
            last_steps = steps[np.array(bounds[1:]) - 1].tolist()
            # A series' latest time: its points' newest, the receipt's time standing in for a point sent without one.
            latest = np.maximum.reduceat(np.where(np.isnan(times), received_at, times), bounds[:-1]).tolist()
        for series, last_step, last_time in zip(fresh, last_steps, latest):
            series.max_step = max(series.max_step, last_step)
            series.last_time = max(series.last_time or 0.0, last_time)
            attempts.saw(series.max_step)
    else:
        _place_points_in_order(run, batch, series_by_key, attempts, writer, apply_phases, received_at)

    Series.objects.bulk_create(new_series.values())
    statements = _series_progress([series_by_key[k] for k in keys if k not in new_series])
    statements += writer.write()
    Phase.objects.bulk_create(phase_rows)
    Event.objects.bulk_create(
        [
            Event(
                run=run,
                attempt=run.attempt,
                step=e.step,
                component=e.component,
                condition=e.condition,
                magnitude=db_float(e.magnitude),
                time=e.time if e.time is not None else received_at,
                detail=e.detail,
                receipt=receipt,
            )
            for e in batch.events
        ]
    )
    return statements


_SERIES = Selection(Series)


def _series_of(run: Run) -> list[Series]:
    """The run's series, as Series.objects.filter(run=run) gives them, from one plain statement (ingest/rows.py)."""
    return _SERIES.fetch(f"{_SERIES.table()}.run_id = %s", [run.pk])


def _only_new_steps(series_by_key, spans, steps) -> bool:
    """True when no series holds any step of this batch yet (steps within a series are sorted and distinct).

    Steps above a series' highest step are new without a look-up; a batch that
    arrives late (several clients, retries) costs one query on block ranges.
    """
    below = []
    lo, hi = None, None
    for key, (start, end) in spans.items():
        series = series_by_key[key]
        first, last = int(steps[start]), int(steps[end - 1])
        if first <= series.max_step and series.pk is not None:
            below.append(series.pk)
            lo = first if lo is None else min(lo, first)
            hi = last if hi is None else max(hi, last)
    if not below:
        return True
    return not Block.objects.filter(series_id__in=below, first_step__lte=hi, last_step__gte=lo).exists()


def _series_progress(series_list):
    """The statements saving the series' layer, highest step and latest time: [(sql, params)].

    One statement on PostgreSQL (a batch touches every series of a run), sent with the rollup
    merge in one round trip; SQLite is in-process anyway.
    """
    if not series_list:
        return []
    table = connection.ops.quote_name(Series._meta.db_table)
    rows = [(s.pk, s.layer, s.max_step, s.last_time) for s in series_list]
    if connection.vendor == "postgresql":
        ids, layers, max_steps, last_times = zip(*rows)
        # Arrays, not a VALUES row per series: the statement's text stays the same from batch to batch.
        return [(f"UPDATE {table} AS s SET layer = v.layer, max_step = v.max_step, last_time = v.last_time "
                 "FROM unnest(%s::bigint[], %s::varchar[], %s::bigint[], %s::double precision[]) "
                 "AS v(id, layer, max_step, last_time) WHERE s.id = v.id",
                 [array_literal(ids), list(layers), array_literal(max_steps), array_literal(last_times)])]
    sql = f"UPDATE {table} SET layer = %s, max_step = %s, last_time = %s WHERE id = %s"
    return [(sql, [layer, max_step, last_time, pk]) for pk, layer, max_step, last_time in rows]


def _place_points_in_order(run, batch, series_by_key, attempts, writer, apply_phases, received_at):
    """The careful path: points in arrival order, detecting re-sent steps (a rewind) as they come."""
    batch_min = {}
    for step, metric, component, *_ in batch.points:
        key = (metric, component)
        if step < batch_min.get(key, step + 1):
            batch_min[key] = step
    batch_seen = {}  # (series key, step) -> attempt that holds it after this batch so far
    stored = {}  # series key -> {step: newest attempt} already in the database, loaded on demand

    def prior_attempt(series, key, step):
        attempt = batch_seen.get((key, step))
        if attempt is not None or series.pk is None:
            return attempt
        if key not in stored:
            stored[key] = stored_steps(series, since=batch_min[key])
        return stored[key].get(step)

    for index, point in enumerate(batch.points):
        apply_phases(index)
        step, metric, component, _, when, _ = point
        key = (metric, component)
        series = series_by_key[key]
        # Steps above everything the series holds need no look-up.
        prior = prior_attempt(series, key, step) if step <= series.max_step else None
        if prior == run.attempt:
            # The job re-sent a step it already sent: it went back to a checkpoint.
            attempts.start(step, AttemptReason.RESENT_STEP)
        series.max_step = max(series.max_step, step)
        series.last_time = max(series.last_time or 0.0, received_at if when is None else when)
        batch_seen[(key, step)] = run.attempt
        attempts.saw(step)
        writer.add(series, run.attempt, point, fresh=prior is None)
    apply_phases(len(batch.points))
