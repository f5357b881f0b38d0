"""Rules against one stored batch: persistence, one open alert per (rule, run, component), a row per change.

Runs inside the evaluation task's transaction, which also marks the batch
evaluated, so a batch's points are judged exactly once even if a worker dies.
Points are judged in arrival order; each kind turns a series' new points into
"held" flags (and a magnitude), and one persistence loop turns flags into
alerts.
"""
import base64
import json
import logging
import math
import threading
import warnings
import zlib
from bisect import bisect_left, insort
from collections import Counter, OrderedDict, defaultdict, deque
from contextlib import contextmanager
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from django.db import DatabaseError, InterfaceError, InternalError, OperationalError, connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from alerts import faults
from alerts.bands import Band, BandParams, envelope, judged_band, reference_band, to_log, trailing_medians
from alerts.batches import Batches
from alerts.changes import record_changes
from alerts.governance import judging_errors
from alerts.params import InvalidParams, resolved
from alerts.silence import SILENT
from alerts.triage import apply_mutes
from alerts.models import Alert, AlertChange, AlertState, BandSample, ChangeKind, Mute, Rule, RuleKind, RuleProgress
from ingest.models import ROLLUP_WIDTH, Attempt, Block, Event, EventSource, Run, Series
from ingest.phases import RECONFIGURED, PhaseIndex, kind_in
from ingest.storage import db_float, read_points, read_points_of_many, unpack

# Threshold and band rules stay quiet in these phases unless their scope names phases itself.
DEFAULT_SKIPPED_PHASES = {"warmup", "eval", "checkpoint", "restart", "data_refresh", RECONFIGURED}
# When a fault spreads through the model within one step (a NaN in one layer's
# weights makes every gradient NaN in the same backward pass), the component
# whose own weights went first is the origin, then the one whose outputs did;
# gradients and updates go bad everywhere at once. Alerts fired at the same
# step are created in this order, so the first alert names the origin.
CAUSAL_ORDER = ["lr", "learning_rate", "weight_norm", "act_norm", "act_max", "dead_fraction", "grad_norm", "update_ratio"]
CAUSAL_RANK = {metric: rank for rank, metric in enumerate(CAUSAL_ORDER)}
POINT_KINDS = (RuleKind.NONFINITE, RuleKind.THRESHOLD, RuleKind.BAND, RuleKind.ABSENCE, RuleKind.DIVERGENCE,
               RuleKind.WEIGHT_JUMP, RuleKind.REFERENCE)
# The database itself failing, not one rule: the whole batch is left for the sweep to evaluate again.
NOT_A_RULES_FAULT = (OperationalError, InterfaceError, InternalError)


class StoredBlock(NamedTuple):
    """The parts of a stored block (ingest.models.Block) that judging reads."""

    series: Series
    attempt: int
    receipt_id: int
    first_step: int
    last_step: int
    data: bytes

log = logging.getLogger(__name__)
PERSIST_CHUNK = 1024  # points of the persistence loop between two looks at which jobs left it


class RuleFailed(Exception):
    """A rule raised while judging a batch (the cause is chained): the batch is judged again without it."""

    def __init__(self, rule):
        super().__init__(f"rule {rule.pk} ({rule.name}) failed")
        self.rule = rule


@contextmanager
def _blamed(rule):
    """Whatever goes wrong inside is this rule's failure (unless the database itself is failing)."""
    try:
        yield
    except (RuleFailed, *NOT_A_RULES_FAULT):
        raise
    except Exception as exc:
        raise RuleFailed(rule) from exc


def rule_params(rule) -> dict:
    """resolved(rule.kind, rule.params), once per rule object (a batch judges each rule over many series)."""
    cached = rule.__dict__.get("_resolved_params")
    if cached is None or cached[0] != (rule.kind, rule.params):
        cached = ((rule.kind, rule.params), resolved(rule.kind, rule.params))
        rule.__dict__["_resolved_params"] = cached
    return cached[1]


def _run_selected(rule, run) -> bool:
    wanted = rule.scope.get("runs") or {}
    return all((run.tags or {}).get(k) == v for k, v in wanted.items())


def series_selected(rule, metric, component, layer) -> bool:
    scope = rule.scope
    return _selected((tuple(scope.get("metrics") or ()), scope.get("component"), scope.get("layer")),
                     metric, component, layer)


@lru_cache(maxsize=65_536)
def _selected(scope, metric, component, layer) -> bool:
    # Asked for every (rule, series) of every batch with the same few scopes and series: remembered, not matched
    # again (fnmatch per pattern was ~4% of evaluation).
    metrics, pattern, wanted_layer = scope
    if not any(fnmatchcase(metric, p) for p in metrics):
        return False
    if not fnmatchcase(component, "*" if pattern is None else pattern):
        return False
    return wanted_layer in (None, layer)


# The distinct values of the last few read-only arrays of phase kinds (PhaseIndex.of's, which a batch's series
# share): every rule of every series asks, and listing thousands of objects for a set was ~5% of evaluation.
DISTINCT_KEPT = 8
DISTINCT_LONGEST = 250_000  # the arrays kept are an evaluation's (a chart's whole series is asked once)
_distinct_memo = threading.local()


def _distinct(kinds) -> set:
    """The set of an object array's values; remembered for a read-only one (nothing changes it afterwards)."""
    if kinds.flags.writeable or len(kinds) > DISTINCT_LONGEST:
        return set(kinds.tolist())
    memo = getattr(_distinct_memo, "arrays", None)
    if memo is None:
        memo = _distinct_memo.arrays = OrderedDict()
    entry = memo.get(id(kinds))
    if entry is None or entry[0] is not kinds:  # the array itself is kept: its id is not reused meanwhile
        entry = memo[id(kinds)] = (kinds, frozenset(kinds.tolist()))
        if len(memo) > DISTINCT_KEPT:
            memo.popitem(last=False)
    return entry[1]


def _phase_allowed(rule, kinds):
    phases = rule.scope.get("phases")
    # Set look-ups, not np.isin: on an array of strings that sorts them, for every series and rule.
    # A step where several phases hold (an eval and a checkpoint at one step) is judged by a rule scoped to any
    # of them, and skipped by default if any of them is skipped there. A block has a handful of distinct kinds
    # in its thousands of points: each is decided once.
    wanted = set(phases) if phases else DEFAULT_SKIPPED_PHASES
    keep = bool(phases)
    decided = {k: kind_in(k, wanted) == keep for k in _distinct(kinds)}
    if len(decided) == 1:  # the usual block: all in one phase
        return np.full(len(kinds), next(iter(decided.values())), dtype=bool)
    return np.fromiter(map(decided.__getitem__, kinds.tolist()), dtype=bool, count=len(kinds))


class Flags:
    """What a kind decided for each new point of a series."""

    def __init__(self, n, unit=""):
        self.held = np.zeros(n, dtype=bool)
        self.magnitude = np.full(n, np.nan)
        self._n, self._unit = n, unit
        self._units = None  # per point, made when one point's unit differs: one rule can measure in two units
        self.band = None  # filled in by band rules when a chart asks for the band they judged with
        self.clears = None  # per point: whether a point not held counts towards resolving (absence: no open gap)
        # Per point: not judged at all (a phase the rule skips, its settling steps, a non-finite value of a band):
        # neither held nor clear, so an eval step inside a lasting drop neither ends the drop's stretch nor counts
        # towards resolving it.
        self.neutral = None

    @property
    def units(self):
        if self._units is None:
            self._units = np.full(self._n, self._unit, dtype=object)
        return self._units

    @property
    def unit(self):
        if self._units is None:
            return self._unit if self._n else ""
        return self._units[0] if len(self._units) else ""

    @unit.setter
    def unit(self, value):
        if self._units is None:
            self._unit = value
        else:
            self._units[:] = value

    def units_listed(self):
        """The units point by point, indexable as a list."""
        return _Same(self._unit) if self._units is None else self._units.tolist()


class _Same:
    """One value at every index (a Flags' unit when no point has its own)."""

    def __init__(self, value):
        self.value = value

    def __getitem__(self, index):
        return self.value


class _Listed:
    """A Flags' arrays as Python lists, for the point-by-point persistence loop."""

    def __init__(self, flags, timed=None):
        self.held, self.magnitude, self.units = flags.held.tolist(), flags.magnitude.tolist(), flags.units_listed()
        self.clears = None if flags.clears is None else flags.clears.tolist()
        self.neutral = None if flags.neutral is None else flags.neutral.tolist()
        self.timed = timed  # whether the rule has persistence_seconds (None: ask the evaluator)


def _threshold(rule, steps, values, info):
    kinds, _, span_start, _ = info
    params = rule_params(rule)
    flags = Flags(len(steps))
    allowed = _phase_allowed(rule, kinds) & (steps - span_start >= params["settle_steps"])
    flags.neutral = ~allowed
    above, below = params["above"], params["below"]
    with np.errstate(invalid="ignore"):
        if above is not None:
            hit = allowed & (values > above)
            flags.held |= hit
            flags.magnitude[hit] = values[hit] - above
            flags.unit = f"above {above}"
        if below is not None:
            hit = allowed & (values < below) & ~flags.held
            flags.held |= hit
            flags.magnitude[hit] = below - values[hit]
            flags.unit = f"below {below}" if above is None else f"outside [{below}, {above}]"
    return flags


def _nonfinite(rule, progress, steps, values, info):
    """Non-finite points: each one held, or, with `count` > 1, each one that makes `count` of the series'
    last `within` points non-finite (the recent flags carried in progress.state)."""
    params = rule_params(rule)
    count, within = params["count"], params["within"]
    flags = Flags(len(steps), "non-finite points in a row")
    bad = ~np.isfinite(values)
    if rule.scope.get("phases"):
        bad &= _phase_allowed(rule, info[0])
    if count <= 1:
        flags.held = bad
        return flags
    order = np.argsort(steps, kind="stable")
    recent = list((progress.state or {}).get("recent", []))[-(within - 1):] if within > 1 else []
    flagged = np.concatenate([np.asarray(recent, dtype=bool), bad[order]])
    # Non-finite points among the last `within` ending at each new point.
    totals = np.cumsum(np.r_[0, flagged.astype(np.int64)])
    ends = np.arange(len(recent) + 1, len(flagged) + 1)
    in_window = totals[ends] - totals[np.maximum(0, ends - within)]
    flags.held[order] = bad[order] & (in_window >= count)
    progress.state = {"recent": flagged[-(within - 1):].tolist() if within > 1 else []}
    return flags


def reference_extremes(references, steps, window, min_references):
    """Per step: the lowest and highest of the reference runs' values there (each run's median of its finite
    points within ±window steps), NaN where fewer than `min_references` runs have one."""
    steps = np.asarray(steps, dtype=np.int64)
    at_steps = []
    for ref_steps, ref_values in references:
        keep = np.isfinite(ref_values)
        ref_steps, ref_values = np.asarray(ref_steps)[keep], np.asarray(ref_values)[keep]
        order = np.argsort(ref_steps, kind="stable")
        ref_steps, ref_values = ref_steps[order], ref_values[order]
        lo = np.searchsorted(ref_steps, steps - window, side="left")
        hi = np.searchsorted(ref_steps, steps + window, side="right")
        value = np.full(len(steps), np.nan)
        for j in np.flatnonzero(hi > lo).tolist():
            value[j] = np.median(ref_values[lo[j]:hi[j]])
        at_steps.append(value)
    if not at_steps:
        nothing = np.full(len(steps), np.nan)
        return nothing, nothing.copy()
    stacked = np.vstack(at_steps)
    enough = np.count_nonzero(np.isfinite(stacked), axis=0) >= min_references
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no reference there
        lowest, highest = np.nanmin(stacked, axis=0), np.nanmax(stacked, axis=0)
    return np.where(enough, lowest, np.nan), np.where(enough, highest, np.nan)


def _reference(rule, series, steps, values, info, evaluator):
    """The run against the project's reference runs at the same step: held beyond `ratio` of their extreme.

    Judges what the run's own band cannot: a level that changed for good (a failed restore that never
    recovered) is normal to a band learnt from the run itself once it lasts, but never to runs that did
    not have the fault. Quiet where no reference run has data near the step, or the project has none.
    """
    kinds, _, span_start, _ = info
    params = rule_params(rule)
    flags = Flags(len(steps), "× the reference runs' extreme")
    window = params["reference_window"]
    references = evaluator.reference_points(series, int(steps.min()), int(steps.max()), window)
    if not references:
        return flags
    lowest, highest = reference_extremes(references, steps, window, params["min_references"])
    allowed = _phase_allowed(rule, kinds) & (steps - span_start >= params["settle_steps"]) & np.isfinite(values)
    ratio, direction = params["ratio"], params["direction"]
    with np.errstate(invalid="ignore", divide="ignore"):
        above = (values > highest * ratio) & (highest > 0)
        below = (values * ratio < lowest) & (lowest > 0) & (values > 0)
        if direction == "above":
            hit, beyond = above, values / highest
        elif direction == "below":
            hit, beyond = below, lowest / values
        else:
            hit, beyond = above | below, np.where(above, values / highest, lowest / values)
    flags.held = hit & allowed
    flags.magnitude[flags.held] = beyond[flags.held]
    return flags


def _pack_history(steps, values):
    """A band's points as RuleProgress.state keeps them, compactly (every batch writes every band row back):
    steps as their first value and differences, zlib-compressed (consecutive steps pack to a few bytes), values
    as float32 where that loses nothing (a job's tensor.item() of a float32), else float64."""
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    deltas = np.diff(steps, prepend=np.int64(0)).astype("<i8")
    packed = {"s": base64.b64encode(zlib.compress(deltas.tobytes(), 1)).decode()}
    with np.errstate(over="ignore"):
        narrow = values.astype("<f4")
    if np.array_equal(narrow.astype(np.float64), values):
        packed["f4"] = base64.b64encode(narrow.tobytes()).decode()
    else:
        packed["f8"] = base64.b64encode(values.astype("<f8").tobytes()).decode()
    return packed


def _unpack_history(packed):
    if isinstance(packed, list):  # as stored before the compact form: raw int64 steps and float64 values
        steps, values = packed
        return (np.frombuffer(base64.b64decode(steps), dtype="<i8").astype(np.int64),
                np.frombuffer(base64.b64decode(values), dtype="<f8").copy())
    steps = np.cumsum(np.frombuffer(zlib.decompress(base64.b64decode(packed["s"])), dtype="<i8")).astype(np.int64)
    if "f4" in packed:
        return steps, np.frombuffer(base64.b64decode(packed["f4"]), dtype="<f4").astype(np.float64)
    return steps, np.frombuffer(base64.b64decode(packed["f8"]), dtype="<f8").copy()


class _Kinds(dict):
    """A band state's arrays per phase kind, unpacked on first read; a kind never assigned goes back packed as it
    came (repacking what was unpacked gives the same bytes, so only the work is saved)."""

    def __init__(self, stored):
        super().__init__(dict.fromkeys(stored))
        self.stored = dict(stored)  # kind: packed form, while the kind still holds what was stored

    def __getitem__(self, kind):
        value = super().__getitem__(kind)
        if value is None and kind in self.stored:
            value = _unpack_history(self.stored[kind])
            super().__setitem__(kind, value)
        return value

    def get(self, kind, default=None):
        return self[kind] if kind in self else default

    def __setitem__(self, kind, value):
        self.stored.pop(kind, None)
        super().__setitem__(kind, value)

    def pop(self, kind, *default):
        self.stored.pop(kind, None)
        return super().pop(kind, *default)

    def items(self):
        return [(kind, self[kind]) for kind in self]

    def values(self):
        return [self[kind] for kind in self]

    @staticmethod
    def packed(kinds):
        stored = getattr(kinds, "stored", {})
        return {k: stored[k] if k in stored else _pack_history(*kinds[k]) for k in kinds}


class _BandJudge:
    """Band rules: the run's own history per phase kind (kept in RuleProgress.state), plus reference runs.

    A restart keeps the history from before the checkpoint it resumed from and
    drops what the abandoned attempt sent past it; for `restore_window` steps
    after a restart every point is judged, whatever its phase, against that
    history with a tolerance of at least `restore_tolerance` × the level: a
    restart that does not continue from where its checkpoint left it is an
    alert, not something a settling window hides.
    """

    def __init__(self, rule, evaluator, band_everywhere=False):
        self.rule = rule
        params = rule_params(rule)  # InvalidParams for a row stored before validation existed
        self.params = BandParams.from_params(params)
        self.direction = params["direction"]
        self.settle = params["settle_steps"]
        self.restore_window = params["restore_window"]
        self.restore_tolerance = params["restore_tolerance"]
        self.keep = 5 * self.params.window
        self.adapt_after = params["adapt_after"]
        self.per = params["per"]
        self.floor_share = params["floor_share"]
        self.per_points = None  # `per`'s points over the batch's span (divided)
        self.level_points, self.level_min, self.level_width = params["level_points"], params["level_min"], params["level_width"]
        self.floor = None
        # The excursion ends with the points that resolve the alert: back inside the band it left.
        self.clear_needed = int(rule.persistence.get("resolve_points", 1)) if isinstance(rule.persistence, dict) else 1
        self.evaluator = evaluator
        # Evaluation keeps the band only where sample_band may keep it; a chart (chart_band) draws it everywhere.
        self.band_everywhere = band_everywhere

    def __call__(self, progress, series, steps, values, info, attempt, restarts=None):
        kinds, baseline, span_start, reset = info
        state = progress.state or {}
        # Unpacked when read: a batch touches one or two phase kinds, and the others go back as they came.
        history = _Kinds(state.get("history", {}))
        pending = _Kinds(state.get("pending", {}))
        tails = _Kinds(state.get("tail", {}))  # level_points: the last raw points
        applied_attempt, applied_reset = state.get("attempt", 1), state.get("reset", -1)
        number, attempt_start = attempt
        if number != applied_attempt and attempt_start is not None:
            # A new attempt resumed from a checkpoint at attempt_start: what the abandoned
            # attempt sent from there on is not the history this one continues. An excursion
            # open before the checkpoint is still open: the restored run must come back to its band.
            history = {k: (s[s < attempt_start], v[s < attempt_start]) for k, (s, v) in history.items()}
            pending = {k: (s[s < attempt_start], v[s < attempt_start]) for k, (s, v) in pending.items()}
            tails = {k: (s[s < attempt_start], v[s < attempt_start]) for k, (s, v) in tails.items()}
        if self.per:
            values = self.divided(series, steps, values)
        flags = Flags(len(steps), "σ beyond the band")
        flags.band = Band(*(np.full(len(steps), np.nan) for _ in range(4)))
        finite = np.isfinite(values)
        starts = restarts if restarts is not None else ([attempt_start] if attempt_start is not None and number > 1 else [])
        in_restore = np.zeros(len(steps), dtype=bool)
        for restart in starts:
            in_restore |= (steps >= restart) & (steps - restart < self.restore_window)
        judged = (_phase_allowed(self.rule, kinds) & (steps - span_start >= self.settle)) | in_restore
        flags.neutral = ~(judged & finite)
        # The highest value the series had before each point (floor_share): what a level is a share of.
        peak, self.floor = state.get("peak", -np.inf), None
        if self.floor_share is not None and len(steps):
            order = np.argsort(steps, kind="stable")
            running = np.maximum.accumulate(np.where(finite[order], values[order], -np.inf))
            before = np.empty(len(steps))
            before[order] = np.maximum(peak, np.r_[-np.inf, running[:-1]])
            peak = float(max(peak, running[-1]))
            self.floor = self.floor_share * before
        boundaries = np.flatnonzero(np.diff(reset) != 0) + 1
        for a, b in zip(np.r_[0, boundaries], np.r_[boundaries, len(steps)]):
            if reset[a] != applied_reset and reset[a] >= 0:
                # A declared new normal (a data refresh, an announced change of config): the baseline starts again.
                history, pending, tails, applied_reset = {}, {}, {}, int(reset[a])
            whole = a == 0 and b == len(steps)  # the usual batch: no new normal in it (the array, not a view: _distinct)
            for kind, chosen in self.kinds_in_order(baseline if whole else baseline[a:b], steps[a:b], finite[a:b],
                                                    history, pending):
                chosen = a + chosen
                empty = (np.array([], dtype=np.int64), np.array([]))
                if kind not in history and kind not in pending and _phase_allowed(self.rule, np.array([kind], dtype=object))[0]:
                    # A phase kind with no history of its own while another kind's excursion is open (a fault that
                    # began in `steady` and lasts into `lr_decay`): it starts from that excursion's frozen band,
                    # not from the broken values, or the fault would go quiet at the phase change.
                    for other, open_points in pending.items():
                        if other in history:
                            history[kind], pending[kind] = history[other], (open_points[0][:0], open_points[1][:0])
                            break
                running = None
                if self.level_points:
                    running, tails[kind] = self.running_medians(tails.get(kind, empty), chosen, steps, values)
                history[kind], open_excursion = self.judge_kind(
                    flags, progress, series, history.get(kind, empty), pending.get(kind), chosen, steps, values,
                    judged, in_restore, running)
                if open_excursion is None:
                    pending.pop(kind, None)
                else:
                    pending[kind] = open_excursion
        progress.state = {
            "history": _Kinds.packed(history),
            "attempt": number,
            "reset": applied_reset,
        }
        if self.floor_share is not None and np.isfinite(peak):
            progress.state["peak"] = peak
        if pending:
            progress.state["pending"] = _Kinds.packed(pending)
        if tails:
            progress.state["tail"] = _Kinds.packed(tails)
        return flags

    @staticmethod
    def kinds_in_order(kinds, steps, finite, history, pending):
        """(kind, indices of its finite points) in the order the kinds are judged: by their first step, and cut
        where a kind with neither history nor an open excursion first appears. Such a kind may begin from
        another kind's open excursion (the fault that lasts across a phase change), so it must see every other
        kind's state as it stood at its first step, whether the points came in one batch or many."""
        present = {}
        distinct = _distinct(kinds)
        for kind in distinct:
            where = np.flatnonzero(finite if len(distinct) == 1 else (kinds == kind) & finite)
            if len(where):
                present[kind] = (int(steps[where].min()), where)
        order = sorted(present, key=lambda k: (present[k][0], k))
        cuts = sorted({present[k][0] for k in order if k not in history and k not in pending})
        if cuts and cuts[0] == present[order[0]][0]:
            cuts = cuts[1:]  # nothing comes before the first kind
        edges = [-np.inf, *cuts, np.inf]
        out = []
        for lo, hi in zip(edges, edges[1:]):
            for kind in order:
                where = present[kind][1]
                part = where[(steps[where] >= lo) & (steps[where] < hi)]
                if len(part):
                    out.append((kind, part))
        return out

    def running_medians(self, tail, chosen, steps, values):
        """Per chosen point, the median of the kind's last `level_points` points up to it and the median of the
        `level_points` before those (judging scale; NaN until there are that many), and the kind's new tail."""
        n = self.level_points
        order = np.argsort(steps[chosen], kind="stable")
        seq_steps = np.r_[tail[0], steps[chosen][order]]
        seq_values = np.r_[tail[1], values[chosen][order]]
        judged_scale = to_log(seq_values) if self.params.scale == "ratio" else seq_values
        now, before = np.full(len(chosen), np.nan), np.full(len(chosen), np.nan)
        if len(seq_values) >= n:
            windows = trailing_medians(judged_scale, n)[n - 1:]  # windows[j]: points j .. j+n-1
            ends = np.arange(len(tail[1]), len(seq_values))  # each new point's index in seq
            at_now, at_before = np.full(len(order), np.nan), np.full(len(order), np.nan)
            ok = ends >= n - 1
            at_now[ok] = windows[ends[ok] - (n - 1)]
            ok_before = ends >= 2 * n - 1
            at_before[ok_before] = windows[ends[ok_before] - (2 * n - 1)]
            now[order], before[order] = at_now, at_before
        keep = 2 * n - 1
        return (now, before), (seq_steps[-keep:], seq_values[-keep:])

    def judge_kind(self, flags, progress, series, old, open_excursion, chosen, steps, values, judged, in_restore,
                   running=None):
        """Judge one phase kind's new points (bands.judged_band); returns that kind's history after them and its
        open excursion (None when none)."""

        def judge(index, at_steps, at_values, band, in_excursion):
            last = band.last
            level = None if running is None else self.level_held(running[0][index], running[1][index], band, in_excursion)
            band = self.with_reference(series, at_steps, band)
            held, beyond, used = self.judge(at_values, band, judged[chosen][index], in_restore[chosen][index])
            if level is not None:
                level_held, level_beyond = level
                level_held &= judged[chosen][index]
                beyond = np.where(level_held & ~held, level_beyond, beyond)
                held |= level_held
            if self.floor is not None and last is not None:
                # Where the series stood just before (frozen during an excursion), against its peak.
                with np.errstate(invalid="ignore"):
                    held &= last >= self.floor[chosen][index]
            return held, beyond, used

        held, magnitude, band, kept, open_excursion = judged_band(
            old[0], old[1], steps[chosen], values[chosen], self.params, judge, pending=open_excursion,
            clear_needed=self.clear_needed, adapt_after=self.adapt_after, held_before=progress.held_points,
            keep=self.keep, rollback=self.level_points or 0,
            exact_at=None if self.band_everywhere else _bucket_ends(steps[chosen]),
        )
        flags.held[chosen] = held
        flags.magnitude[chosen] = magnitude
        if flags.band is not None:
            for f in ("centre", "lower", "upper"):
                getattr(flags.band, f)[chosen] = getattr(band, f)
        return kept, open_excursion

    def level_held(self, medians, before, band, in_excursion):
        """(held, spreads beyond) of the level: the median of the last `level_points` points against the median
        of the `level_points` before them (a shift of level the band's trend would take in), or, in an excursion,
        against the frozen level it left. Starting an excursion also takes `level_min` of a shift; ending one
        takes the level back within `level_width` times its own spread (σ × 1.25 / √points)."""
        n = self.level_points
        if in_excursion:
            level = np.log(band.centre) if band.log else band.centre
        else:
            level = before
        spread = 1.2533 * band.sigma / np.sqrt(n)
        need = self.level_width * spread * (1 if in_excursion else np.sqrt(2))  # two medians' difference
        if not in_excursion and self.level_min:
            need = np.maximum(need, np.log1p(self.level_min) if band.log else self.level_min * np.abs(level))
        with np.errstate(invalid="ignore"):
            if self.direction == "above":
                shift = medians - level
            elif self.direction == "below":
                shift = level - medians
            else:
                shift = np.abs(medians - level)
            held = np.isfinite(shift) & (shift > need)
        return held, (shift - need) / spread

    def divided(self, series, steps, values):
        """The series per unit of the run-level metric `per` as it stood at each step (update_ratio per unit of
        learning rate: what the optimizer did beyond what its schedule asked for); NaN where `per` has no point
        at or up to PER_LOOKBACK steps before it, or is not positive, so such points are not judged."""
        per = self.evaluator.series_named(self.per, "")
        if per is None:
            return values
        # `per` as it stood at each step: its latest point at or before it (a job may log the learning rate
        # every few steps and its health every ten), from at most PER_LOOKBACK steps before; read once for
        # every series of the batch this judge divides.
        lo, hi = max(0, int(steps.min()) - PER_LOOKBACK), int(steps.max())
        cached = self.per_points
        if cached is None or cached[0] != per.pk or lo < cached[1] or hi > cached[2]:
            batches = getattr(self.evaluator, "batches", None)
            if batches is not None and batches.min_step is not None:
                lo, hi = min(lo, max(0, batches.min_step - PER_LOOKBACK)), max(hi, batches.max_step)
            per_steps, per_values, _ = read_points(per, lo, hi, stream=False)  # the batch and PER_LOOKBACK before it
            order = np.argsort(per_steps, kind="stable")
            cached = self.per_points = (per.pk, lo, hi, per_steps[order], per_values[order])
        per_steps, per_values = cached[3], cached[4]
        if not len(per_steps):
            return np.full(len(values), np.nan)
        at = np.searchsorted(per_steps, steps, side="right") - 1
        found = at >= 0
        at = np.maximum(at, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(found & (per_values[at] > 0), values / per_values[at], np.nan)

    def with_reference(self, series, steps, band):
        references = self.evaluator.reference_points(series, int(steps.min()), int(steps.max()), self.params.reference_window)
        if not references:
            return band
        return envelope(band, reference_band(references, steps, self.params))

    def judge(self, values, band, judged, restoring):
        """(held, σ beyond the band, the band used): after a restart, the restore tolerance widens it."""
        used = band.widened(restoring, self.restore_tolerance)
        held, beyond = used.outside(values, self.direction)
        return held & judged, beyond, used


def _bucket_ends(steps):
    """Per point, whether it is the last of its rollup bucket among these (by step, then position): where
    sample_band may keep the band for charts, so where a band rule needs its band exactly (judged_band's
    exact_at). The last judged point of a bucket among all of a series' points is the last of its own kind's."""
    if not len(steps):
        return np.zeros(0, dtype=bool)
    buckets = steps // ROLLUP_WIDTH
    if (steps[1:] >= steps[:-1]).all():  # the usual case: the sort below would leave them in place
        return np.r_[buckets[1:] != buckets[:-1], True]
    order = np.lexsort((steps, buckets))
    ends = np.zeros(len(steps), dtype=bool)
    ends[order[np.r_[buckets[order][1:] != buckets[order][:-1], True]]] = True
    return ends


PER_LOOKBACK = 1_000  # band `per`: how far back the divisor's latest point may be

# Open step gaps a rule remembers per series; beyond this the oldest are forgotten (a run that logs sparsely).
MAX_OPEN_GAPS = 200


def _absence(rule, progress, series, steps, times, attempt):
    """Gaps in the steps (lost batches) or in the points' own times, judged against every batch the run holds.

    Batches of one run may be stored and evaluated in any order (parallel
    senders writing disjoint step ranges), so a new point's neighbours are the
    stored points next to it in step order within its attempt, whichever batch
    brought them. A step gap is remembered as open (`progress.state["gaps"]`:
    the stored steps either side of it) until evaluated batches fill it; while
    one is open, later points do not clear the alert, and once all are filled
    the next point resolves it: a lost batch stays alerted, a late one ends the
    alert. After a rewind the count starts again from where the job resumed. A
    gap in the points' own times clears with the next point: a job that hung
    and resumed has lost nothing.
    """
    state = progress.state or {}
    flags = Flags(len(steps), "missing steps")
    params = rule_params(rule)
    max_missing, max_seconds = params["missing_steps"], params["seconds"]
    if max_missing is None and max_seconds is None:
        # Only `behind_steps` (stale_series): nothing to judge in the points themselves, no neighbours to read;
        # the series' own interval and whether it caught up are all it needs.
        progress.state = _cadence(state, steps)
        return Flags(len(steps), "steps without data while the run went on")
    number, attempt_start = attempt
    gaps = [tuple(g) for g in state.get("gaps", [])] if state.get("attempt", 1) == number else []
    last_time = state.get("last_time")
    near_steps, near_times = _stored_neighbours(series, number, int(steps.min()), int(steps.max()))
    if number > 1 and attempt_start is not None and near_steps[0] >= steps.min():
        # The attempt resumed at attempt_start: count from there, and time from the data before the restart.
        near_steps = np.r_[attempt_start - 1, near_steps]
        near_times = np.r_[np.nan if last_time is None else last_time, near_times]
    new = np.isin(near_steps, steps)
    index_of = {s: i for i, s in enumerate(steps.tolist())}
    left, right = near_steps[:-1], near_steps[1:]
    missing = right - left - 1
    touching = new[:-1] | new[1:]

    def at(k):  # the new point after the gap, or before it when the far side was stored earlier
        return index_of[int(right[k])] if new[k + 1] else index_of[int(left[k])]

    lo, hi = int(near_steps[0]), int(near_steps[-1])
    still_open, touched = [], []
    for a, b in gaps:
        if b <= lo or a >= hi:
            still_open.append((a, b))
            continue
        touched.append((a, b))
        # Parts of the gap outside this window hold only batches not evaluated yet: they judge those.
        if a < lo:
            still_open.append((a, lo))
        if b > hi:
            still_open.append((hi, b))
    if max_missing is not None:
        for k in np.flatnonzero(missing > max_missing).tolist():
            a, b = int(left[k]), int(right[k])
            if any(x <= a and b <= y for x, y in touched):
                still_open.append((a, b))  # what is left of a gap already alerted
            elif touching[k]:
                still_open.append((a, b))
                i = at(k)
                flags.held[i] = True
                flags.magnitude[i] = np.fmax(flags.magnitude[i], float(missing[k]))
    if max_seconds is not None:
        silence_alerted = "last_time" in state and last_time is None  # the sweep's silent alert covered it
        with np.errstate(invalid="ignore"):
            slow = touching & (np.diff(near_times) > max_seconds)
        for k in np.flatnonzero(slow).tolist():
            i = at(k)
            if flags.held[i] or (silence_alerted and not new[k]):
                continue
            flags.held[i] = True
            flags.magnitude[i] = float(near_times[k + 1] - near_times[k])
            flags.units[i] = "seconds without data"
    still_open = sorted(set(still_open))[-MAX_OPEN_GAPS:]
    # An unfilled gap keeps its alert open: points after it are no evidence that the data came back.
    flags.clears = np.full(len(steps), not still_open)
    latest = float(np.max(times))
    progress.state = {"attempt": number, "gaps": [list(g) for g in still_open],
                      "last_time": latest if last_time is None else max(last_time, latest)}
    if params.get("behind_steps") is not None:
        progress.state.update(_cadence(state, near_steps))
    return flags


def _cadence(state, steps) -> dict:
    """What stale_series needs of a series that sent points: its own step interval, the batches it was in, and
    how far behind it had fallen before it caught up."""
    diffs = np.diff(steps)
    # Steps come in step order (a sort for np.unique was most of this); otherwise as they are, without repeats.
    diffs = diffs[diffs > 0] if (diffs >= 0).all() else np.diff(np.unique(steps))
    cadence = int(np.median(diffs)) if len(diffs) else state.get("cadence", 1)
    return {"cadence": max(1, cadence), "batches": state.get("batches", 0) + 1,
            "caught_up": max(state.get("caught_up", 0), state.get("behind", 0)), "behind": 0}


def _stored_neighbours(series, attempt, lo, hi):
    """Steps and times, in step order, of everything the series' attempt holds from the last stored step
    before `lo` to the first after `hi`, whichever batches stored them (a block without times: its
    batch's arrival time)."""
    blocks = Block.objects.filter(series=series, attempt=attempt)
    within = blocks.filter(last_step__gte=lo, first_step__lte=hi).values_list("pk", flat=True)
    before = blocks.filter(last_step__lt=lo).order_by("-last_step").values_list("pk", flat=True)[:1]
    after = blocks.filter(last_step__gt=hi, first_step__gt=hi).order_by("first_step").values_list("pk", flat=True)[:1]
    if connection.features.supports_slicing_ordering_in_compound:
        ids = within.union(before, after, all=True)  # PostgreSQL: one round trip, each part by its own index scan
    else:
        ids = {*within, *before, *after}  # SQLite refuses LIMIT inside a compound SELECT
    step_parts, time_parts = [], []
    for data, arrived in Block.objects.filter(pk__in=ids).values_list("data", "receipt__received_at"):
        s, _, t = unpack(data)
        step_parts.append(s)
        time_parts.append(np.full(len(s), arrived.timestamp()) if t is None else t)
    steps, times = np.concatenate(step_parts), np.concatenate(time_parts)
    order = np.argsort(steps, kind="stable")
    steps, times = steps[order], times[order]
    # Only the nearest step on either side: the whole neighbouring blocks may interleave with others.
    first = max(0, int(np.searchsorted(steps, lo)) - 1)
    last = min(len(steps), int(np.searchsorted(steps, hi, side="right")) + 1)
    return steps[first:last], times[first:last]


def _divergence(rule, progress, run, steps, values):
    """Validation metric rising over K evaluations in a row while the training metric keeps falling.

    With `fast_rise`, also held as soon as the validation metric rises at an
    evaluation and stands `fast_rise` above the lowest evaluation so far while
    the training metric, over the interval before this evaluation, is below
    what it was over the interval before that lowest one: one rise with that
    much evidence instead of K (a run that overfits is seen about an evaluation
    interval after it begins; a run whose training loss rose too, such as a
    data fault, is not divergence).
    """
    params = rule_params(rule)
    k, min_rise, fast_rise, noise_z = params["evaluations"], params["min_rise"], params["fast_rise"], params["noise_z"]
    training = Series.objects.filter(run=run, metric=params["training"], component="").first()
    state = progress.state or {}
    evals = [tuple(e) for e in state.get("evals", [])]
    recent = [list(r) for r in state.get("recent", []) if isinstance(r, list)]  # [step, value] of the last ones
    best = state.get("best")  # [step of the evaluation before the lowest one (or None), its step, its value]
    diverged_from = state.get("diverged_from")  # the level an open divergence rose from
    flags = Flags(len(steps), "relative rise of the validation metric")

    def training_median(lo, hi):
        _, values_, _ = read_points(training, lo + 1, hi)
        values_ = values_[np.isfinite(values_)]
        return np.median(values_) if len(values_) else np.nan

    def training_noise(lo, hi):
        _, values_, _ = read_points(training, lo + 1, hi)
        values_ = values_[np.isfinite(values_)]
        if len(values_) < TRAINING_NOISE_POINTS:
            return None
        return 1.4826 * float(np.median(np.abs(np.diff(values_, n=2)))) / np.sqrt(6) * np.sqrt(2)

    for i, (step, value) in enumerate(zip(steps.tolist(), values.tolist())):
        if not np.isfinite(value):
            continue
        before = evals[-1] if evals else None
        # The noise of the evaluations before this one, up to the lowest point: the turn of a divergence itself
        # is no evidence of noise.
        upto = [v for st, v in recent if best is None or st <= best[1]]
        spread = evaluation_noise(upto[-NOISE_EVALUATIONS:])
        if spread is None and noise_z and training is not None and before is not None:
            # Until NOISE_MIN_EVALUATIONS before the lowest point tell the evaluation's own noise (early in
            # training, or while the first evaluation stays the lowest by chance), the training metric's noise
            # stands in for it: an evaluation averages at least as many examples as one step's batch, so the
            # difference of two evaluations varies by at most √2 × the step-to-step spread of the training metric.
            spread = training_noise(before[0], step)
        # With neither (no training points between the evaluations), the shares are UNKNOWN_NOISE_SHARES times as
        # large: a divergence early in training is not left unseen, and a few noisy evaluations cannot page.
        known = noise_z == 0 or spread is not None
        noise = noise_z * spread if spread is not None else 0.0
        k_share = min_rise if known else UNKNOWN_NOISE_SHARES * (fast_rise or min_rise)
        fast_share = None if fast_rise is None else (fast_rise if known else UNKNOWN_NOISE_SHARES * fast_rise)
        recent = (recent + [[step, value]])[-NOISE_KEPT:]
        evals = (evals + [(step, value)])[-(k + 2):]
        if training is not None and len(evals) >= k + 2:
            vals = [v for _, v in evals[1:]]
            rising = (all(b > a for a, b in zip(vals, vals[1:])) and vals[-1] >= vals[0] * (1 + k_share)
                      and vals[-1] - vals[0] > noise)
            # Training loss between the first two and between the last two evaluations of the stretch.
            if rising and training_median(evals[-2][0], evals[-1][0]) < training_median(evals[0][0], evals[1][0]):
                flags.held[i] = True
                flags.magnitude[i] = (vals[-1] - vals[0]) / abs(vals[0]) if vals[0] else np.inf
        if (fast_share is not None and training is not None and not flags.held[i] and best is not None
                and before is not None and step > before[0] and value > before[1]
                and value >= best[2] * (1 + fast_share) and best[2] > 0 and value - best[2] > noise):
            best_from = best[0] if best[0] is not None else best[1] - (step - before[0])
            if training_median(before[0], step) < training_median(best_from, best[1]):
                flags.held[i] = True
                flags.magnitude[i] = (value - best[2]) / abs(best[2])
        if flags.held[i]:
            diverged_from = diverged_from if diverged_from is not None else (best[2] if best is not None else evals[1][1])
        elif diverged_from is not None:
            # A divergence ends when the validation metric is back near the level it rose from, not when it
            # merely stops rising: a metric that stays up has not recovered.
            if value - diverged_from > max(noise, min_rise * abs(diverged_from)):
                flags.held[i] = True
                flags.magnitude[i] = (value - diverged_from) / abs(diverged_from) if diverged_from else np.inf
            else:
                diverged_from = None
        # The lowest point as the running median of three evaluations: the lowest single evaluation of a noisy
        # set is low by chance, and a rise from it is partly noise.
        level = float(np.median([v for _, v in recent[-3:]])) if noise_z and len(recent) >= 3 else value
        if best is None or level < best[2]:
            best = [before[0] if before is not None and before[0] < step else None, step, level]
    progress.state = {"evals": [list(e) for e in evals], "best": best, "recent": recent, "diverged_from": diverged_from}
    return flags


NOISE_EVALUATIONS = 16
NOISE_KEPT = 64  # evaluations remembered: the noise is taken from the 16 up to the lowest point among them
NOISE_MIN_EVALUATIONS = 4
TRAINING_NOISE_POINTS = 8  # training points between two evaluations for their spread to stand in for the evaluation's
UNKNOWN_NOISE_SHARES = 4


def evaluation_noise(values) -> float | None:
    """The noise of the difference of two evaluations, in the metric's units, from the evaluations' values: the
    robust spread (MAD) of their second differences (a trend, even a curving one, mostly cancels out of them;
    white noise of σ gives √6·σ), times √2. None with fewer than NOISE_MIN_EVALUATIONS values."""
    if len(values) < NOISE_MIN_EVALUATIONS:
        return None
    second = np.diff(np.asarray(values, dtype=float), n=2)
    return 1.4826 * float(np.median(np.abs(second))) / np.sqrt(6) * np.sqrt(2)


# What one step's update can do to a weight norm: |log(‖w′‖/‖w‖)| ≤ −log(1 − r) for update ratio r < 1.
MAX_UPDATE_RATIO = 0.99


class RatioHistory:
    """The latest `window` per-step ratios, for their median and the median of their absolute deviations from
    it: the same numbers as np.median gives (the middle value, or the two middle values' mean), from a copy
    kept sorted once they are asked for (a component without update_ratio: every point), in a few bisections a
    point instead of two medians over the whole window."""

    def __init__(self, ratios, window):
        self.recent = deque(ratios, maxlen=window)
        self.ordered = None  # sorted when first needed, then kept so

    def __len__(self):
        return len(self.recent)

    def append(self, ratio):
        if self.ordered is not None:
            if len(self.recent) == self.recent.maxlen:
                del self.ordered[bisect_left(self.ordered, self.recent[0])]
            insort(self.ordered, ratio)
        self.recent.append(ratio)

    def extend(self, ratios):
        if self.ordered is None:
            self.recent.extend(ratios)
        else:
            for ratio in ratios:
                self.append(ratio)

    def centre_and_spread(self) -> tuple[float, float]:
        """(median, median of |ratio − median|)."""
        if self.ordered is None:
            self.ordered = sorted(self.recent)
        o, n = self.ordered, len(self.ordered)
        half = n // 2
        centre = o[half] if n % 2 else (o[half - 1] + o[half]) / 2
        if n % 2:
            return centre, self._nearest(centre, half + 1)
        return centre, (self._nearest(centre, half) + self._nearest(centre, half + 1)) / 2

    def _nearest(self, centre, k) -> float:
        """The k-th smallest |ratio − centre|: the k ratios nearest the centre lie side by side in sorted order,
        and the farthest of them is at one end."""
        o = self.ordered
        lo, hi = 0, len(o) - k
        while lo < hi:
            mid = (lo + hi) // 2
            if centre - o[mid] > o[mid + k] - centre:
                lo = mid + 1
            else:
                hi = mid
        return max(abs(o[lo] - centre), abs(o[lo + k - 1] - centre))

    def listed(self) -> list:
        return list(self.recent)


def _weight_jump(rule, progress, series, steps, values, attempt, evaluator=None):
    """A component's own weights moved by more than its optimizer could have moved them.

    Between two consecutive samples of its weight norm (w at step p, w′ at step
    s), the updates of steps p..s−1 can change the norm by at most a factor
    Π 1/(1 − rᵢ) either way, rᵢ being the update_ratio ‖Δw‖/‖w‖ of step i
    (triangle inequality). Where the job sends the component's update_ratio, a
    change of |log(w′/w)| beyond `allowance` × Σ −log(1 − rᵢ) (steps without a
    sample counted at the mean of those sampled between p and s) is held; where
    it does not, beyond `width` robust σ above the component's own history of
    per-step log ratios. Changes under `min_ratio` never are. A weight
    multiplied or zeroed outside the optimizer is the origin of what follows in
    the other components, so the alert names it at the step it shows.
    """
    params = rule_params(rule)
    number, _ = attempt
    state = progress.state or {}
    flags = Flags(len(steps), "× change of the weight norm between samples")
    order = np.argsort(steps, kind="stable")
    first = int(steps.min())
    last = state.get("last")  # [step, value, attempt] of the latest sample judged
    if first <= 0:
        last = None  # nothing can come before step 0
    elif last is None or last[2] != number or last[0] >= first:
        # Another attempt, or batches evaluated out of order: the stored sample before this batch's first step.
        prev_steps, prev_values, _ = read_points(series, max(0, first - 100_000), first - 1)
        ok = np.flatnonzero(np.isfinite(prev_values))
        last = [int(prev_steps[ok[-1]]), float(prev_values[ok[-1]]), number] if len(ok) else None
    rates = RatioHistory(state.get("rates", []), params["window"])  # the latest `window` per-step log ratios
    if evaluator is None:
        ratio_series = Series.objects.filter(run_id=series.run_id, metric="update_ratio", component=series.component).first()
        read = read_points
    else:
        ratio_series, read = evaluator.series_named("update_ratio", series.component), evaluator.read_points
    if ratio_series is not None:
        lo = first if last is None else last[0]
        u_steps, u_values, _ = read(ratio_series, lo, int(steps.max()))
        ok = np.isfinite(u_values) & (u_values >= 0)
        u_steps, u_values = u_steps[ok], np.minimum(u_values[ok], MAX_UPDATE_RATIO)
        u_costs = -np.log1p(-u_values)  # what each step's update can do to the log norm, at most
    floor = np.log(params["min_ratio"])
    # Each finite sample after the one before it (in step order): its index, step, the step before, |Δ log norm|
    # and the log norm before. Non-finite weights are the nonfinite rules' to judge.
    finite = order[np.isfinite(values[order])]
    all_logs = to_log(values)
    at, logs = steps[finite], all_logs[finite]
    pair_index = pair_steps = pair_before = pair_jumps = pair_before_logs = np.empty(0)
    if len(finite):
        last_log = None if last is None else float(to_log(np.array([last[1]]))[0])
        prev_steps = np.concatenate(([-1 if last is None else last[0]], at[:-1]))
        prev_logs = np.concatenate(([np.nan if last is None else last_log], logs[:-1]))
        paired = at > prev_steps  # the first has none without a sample before it (prev step -1: never past)
        if last is None:
            paired[0] = False
        pair_index, pair_steps, pair_before = finite[paired], at[paired], prev_steps[paired]
        pair_jumps, pair_before_logs = np.abs(logs - prev_logs)[paired], prev_logs[paired]
        last = [int(at[-1]), float(values[finite[-1]]), number]
    allowed_by_ratio = [None] * len(pair_index)
    if ratio_series is not None and len(pair_index):
        # The update ratios of steps before..step-1 (sorted by step), else of before..step.
        lo = np.searchsorted(u_steps, pair_before)
        hi = np.searchsorted(u_steps, pair_steps)
        hi = np.where(hi == lo, np.searchsorted(u_steps, pair_steps, side="right"), hi)
        one = hi == lo + 1  # the usual case: a sample every step
        allowed = np.full(len(pair_index), np.nan)
        allowed[one] = params["allowance"] * (pair_steps - pair_before)[one] * u_costs[lo[one]]
        allowed_by_ratio = allowed.tolist()
        for k in np.flatnonzero(~one).tolist():
            a, b = int(lo[k]), int(hi[k])
            gap = int(pair_steps[k] - pair_before[k])
            allowed_by_ratio[k] = params["allowance"] * gap * float(np.mean(u_costs[a:b])) if b > a else None
    jumped_from = state.get("from") if state.get("attempt", number) == number else None
    if len(pair_index) and jumped_from is None and ratio_series is not None and None not in allowed_by_ratio:
        # The usual batch: every change judged by the update ratios and none beyond them. Nothing is held then,
        # and every ratio joins the history: what the loop below would do a point at a time.
        if not (pair_jumps > np.maximum(floor, np.array(allowed_by_ratio))).any():
            rates.extend((pair_jumps / (pair_steps - pair_before)).tolist())
            pair_index = pair_index[:0]
    pairs = zip(pair_index.tolist(), pair_steps.tolist(), pair_before.tolist(), pair_jumps.tolist(),
                pair_before_logs.tolist())
    for (i, step, before, jump, before_log), allowed in zip(pairs, allowed_by_ratio):
        gap = step - before
        if allowed is None and len(rates) >= params["min_history"]:
            centre, spread = rates.centre_and_spread()
            allowed = gap * (centre + params["width"] * 1.4826 * spread)
        if allowed is not None and jump > max(floor, allowed):
            flags.held[i] = True
            flags.magnitude[i] = float(np.exp(jump))
            if jumped_from is None:
                jumped_from = before_log  # where the weights were before something outside the optimizer moved them
            continue
        rates.append(jump / gap)  # a jump is kept out of the history it is judged by
        if jumped_from is not None:
            # The weights stay where the jump put them until they are back within min_ratio of where they were
            # (a rollback): the alert lasts as long as the damage does.
            away = abs(float(all_logs[i]) - jumped_from)
            if away > floor:
                flags.held[i] = True
                flags.magnitude[i] = float(np.exp(away))
            else:
                jumped_from = None
    progress.state = {"last": last, "rates": rates.listed(), "attempt": number}
    if jumped_from is not None:
        progress.state["from"] = jumped_from
    return flags


def update_rows(model, rows):
    """Write `rows` ([(pk, {field name: value})]): one UPDATE for each set of fields on PostgreSQL
    (Django's bulk_update builds a CASE per field and row, slower to build than the batch is to judge)."""
    groups = defaultdict(list)
    for pk, values in rows:
        if values:
            groups[tuple(sorted(values))].append((pk, values))
    qn = connection.ops.quote_name
    for names, members in groups.items():
        if connection.vendor != "postgresql" or len(members) == 1:
            for pk, values in members:
                model.objects.filter(pk=pk).update(**values)
            continue
        fields = [model._meta.get_field(name) for name in names]
        pk_field = model._meta.pk
        if _update_from_json(model, pk_field, fields, members):
            continue
        row = "(" + ", ".join(f"%s::{f.db_type(connection)}" for f in [pk_field, *fields]) + ")"
        columns = ", ".join(qn(f.column) for f in [pk_field, *fields])
        sets = ", ".join(f"{qn(f.column)} = v.{qn(f.column)}" for f in fields)
        with connection.cursor() as cursor:
            for start in range(0, len(members), 500):
                chunk = members[start:start + 500]
                params = []
                for pk, values in chunk:
                    params.append(pk)
                    params += [f.get_db_prep_save(values[f.name], connection) for f in fields]
                cursor.execute(
                    f"UPDATE {qn(model._meta.db_table)} AS t SET {sets} FROM (VALUES {', '.join([row] * len(chunk))}) "
                    f"AS v({columns}) WHERE t.{qn(pk_field.column)} = v.{qn(pk_field.column)}", params)


def _update_from_json(model, pk_field, fields, members) -> bool:
    """The rows as one JSON parameter (jsonb_to_recordset), on PostgreSQL: a short statement that is the same
    every batch, where a VALUES list of a few hundred rows is a new statement to parse (psycopg splits its text
    on every call) and a parameter per field to adapt. False, with nothing written, where a value is not one
    JSON carries exactly (another type, a non-finite float, a JSON field's None: SQL NULL, not JSON null)."""
    rows = []
    for pk, values in members:
        if not isinstance(pk, int) or isinstance(pk, bool):
            return False
        row = {pk_field.column: pk}
        for f in fields:
            value = values[f.name]
            if isinstance(f, models.JSONField):
                if value is None or f.encoder is not None:
                    return False
            elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, str))
                                        or (isinstance(value, float) and not math.isfinite(value))):
                return False
            elif isinstance(value, float) and isinstance(f, models.IntegerField):
                return False  # "3.0" is no integer to PostgreSQL's input, where a cast from float8 rounds
            row[f.column] = value
        rows.append(row)
    try:
        payload = json.dumps(rows, allow_nan=False)
    except (TypeError, ValueError):
        return False
    qn = connection.ops.quote_name
    columns = ", ".join(f"{qn(f.column)} {f.db_type(connection)}" for f in [pk_field, *fields])
    sets = ", ".join(f"{qn(f.column)} = v.{qn(f.column)}" for f in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(model._meta.db_table)} AS t SET {sets} FROM jsonb_to_recordset(%s::jsonb) AS v({columns}) "
            f"WHERE t.{qn(pk_field.column)} = v.{qn(pk_field.column)}", [payload])
    return True


BAND_SAMPLE_COLUMNS = (("rule_id", "integer"), ("series_id", "integer"), ("bucket", "bigint"), ("step", "bigint"),
                       ("centre", "double precision"), ("lower", "double precision"), ("upper", "double precision"))


def _upsert_band_samples(samples) -> bool:
    """The batch's band samples (rows of BAND_SAMPLE_COLUMNS) as one JSON parameter on PostgreSQL (as
    _update_from_json), each replacing the bucket's sample; False, with nothing written, where JSON cannot carry
    a value (±inf) or not on PostgreSQL."""
    if connection.vendor != "postgresql":
        return False
    columns = [column for column, _ in BAND_SAMPLE_COLUMNS]
    try:
        # allow_nan=False: a non-finite value (which the JSON path cannot carry) raises instead.
        payload = json.dumps([dict(zip(columns, row)) for row in samples], allow_nan=False)
    except (TypeError, ValueError):
        return False
    qn = connection.ops.quote_name
    names = ", ".join(qn(column) for column, _ in BAND_SAMPLE_COLUMNS)
    typed = ", ".join(f"{qn(column)} {kind}" for column, kind in BAND_SAMPLE_COLUMNS)
    updated = ", ".join(f"{qn(c)} = EXCLUDED.{qn(c)}" for c in ("step", "centre", "lower", "upper"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {qn(BandSample._meta.db_table)} ({names}) SELECT {names} FROM jsonb_to_recordset(%s::jsonb) "
            f"AS v({typed}) ON CONFLICT (rule_id, series_id, bucket) DO UPDATE SET {updated}", [payload])
    return True


PROGRESS_FIELDS = ("held_points", "held_since_step", "held_since_time", "clear_points", "state")


def _changed(progress) -> bool:
    as_read = getattr(progress, "_as_read", None)
    if as_read is None:
        return True
    # `is` first: an untouched state is the very dict that was read, and comparing band histories costs.
    return any(now is not then and now != then
               for now, then in zip((getattr(progress, f) for f in PROGRESS_FIELDS), as_read))


class _Evaluator:
    def __init__(self, receipts, run, rules, invalid=None):
        self.batches = None if receipts is None else Batches.of(receipts)
        self.receipt = None if receipts is None else self.batches.latest  # what the changes it writes name
        self.run = run
        self.now = timezone.now()
        # Rules whose stored settings do not validate: {rule pk: why}. Never judged; where one applies
        # to this batch it goes in `faults` and is recorded once the batch is judged.
        self.invalid = invalid or {}
        self.faults = {}
        self.judged = set()  # rules that judged some of this batch (to see one recover)
        self.phases = PhaseIndex(run)
        self.extended = set()  # id() of the alerts already given an "extended" row for this batch
        self.alert_updates = {}  # alert pk: (alert, {field: value}), written once per alert per batch (flush)
        # Alerts fired and changes made, not written yet: one INSERT for each table (flush). A batch that
        # fires a dozen alerts, or a storm, wrote an alert, its fired row, its resolution and its resolved row
        # one round trip each, and a worker waiting on them leaves its CPU to ingest.
        self.pending_alerts = []
        self.pending_changes = []
        self.progress_rows = self.stored_progress(rules)
        self.open_alerts = self.stored_open_alerts(rules)
        self.rules_with_mutes = None  # muted_rules
        self.reference_runs = list(
            Run.objects.filter(project_id=run.project_id, reference=True).exclude(pk=run.pk).values_list("pk", flat=True)
        )
        self.reference_cache = {}
        self.band_judges = {}
        self.seconds_needed = {}  # rule pk: its persistence_seconds
        self.attempt_starts = {}
        self.run_series = None  # series_named
        self.metric_points = {}  # read_points
        self.blocks_now, self.unpacked_now = None, {}  # points(): this evaluation's blocks, unpacked (unpacked())
        self.touched = set()  # progress rows this batch changed: only these are written back
        self.band_samples = {}
        self.batch_series = None  # points(): the series this batch brought
        self.spans, self.attempt_now = {}, None  # points(): each attempt's (first, last, batch) blocks (receipt_at)

    # What the evaluator reads and writes besides judging: a backtest (alerts/backtest.py) replaces these
    # with state kept in memory, so it runs this same judging code without a row written.

    def stored_progress(self, rules):
        rows = {(p.rule_id, p.component, p.metric): p for p in RuleProgress.objects.filter(run=self.run, rule__in=rules)}
        for p in rows.values():
            # As read: save_progress writes back only rows that differ (a kind gives `state` a new dict when it
            # changes it, never edits the stored one in place).
            p._as_read = tuple(getattr(p, f) for f in PROGRESS_FIELDS)
        return rows

    def stored_open_alerts(self, rules):
        alerts = Alert.objects.filter(run=self.run, rule__in=rules).exclude(state=AlertState.RESOLVED)
        return {(a.rule_id, a.component): a for a in alerts.select_related("rule", "run")}

    def create_alert(self, **fields):
        alert = Alert(**fields)
        fired = AlertChange(alert=alert, kind=ChangeKind.FIRED, step=fields["fired_step"], at=self.now,
                            receipt=self.receipt_at(fields["fired_step"]))
        if alert.rule_id in self.muted_rules():
            # Under an active mute it is created muted, with its own row: written now, after what came before it.
            self.flush()
            alert.save(force_insert=True)
            record_changes([fired])
            apply_mutes(alert, self.now)
            return alert
        # Written at the next flush, as it then stands (resolved already, if it ended in this batch).
        self.pending_alerts.append(alert)
        self.pending_changes.append(fired)
        return alert

    def muted_rules(self) -> set:
        """The rules with an active mute, read once an evaluation (most have none): apply_mutes asks of each new
        alert which mute covers it, a query an alert that a storm would repeat for every one."""
        if self.rules_with_mutes is None:
            self.rules_with_mutes = set(Mute.objects.active(self.now).filter(rule__project_id=self.run.project_id)
                                        .values_list("rule_id", flat=True))
        return self.rules_with_mutes

    def update_alert(self, alert, updates, step):
        if updates and alert.pk is not None:  # an alert not written yet is written as it stands (fire_or_extend)
            self.alert_updates.setdefault(alert.pk, (alert, {}))[1].update(updates)
        if id(alert) not in self.extended:
            self.pending_changes.append(AlertChange(alert=alert, kind=ChangeKind.EXTENDED, step=step, at=self.now,
                                                    receipt=self.receipt_at(step)))
            self.extended.add(id(alert))

    def flush(self):
        """What this evaluation changed so far, written in an order the constraints allow: the alerts' updates
        first (one resolved makes room for its component's next alert: one open alert a component), then the
        alerts fired, then the changes in the order they happened."""
        update_rows(Alert, [(pk, updates) for pk, (_, updates) in self.alert_updates.items()])
        self.alert_updates = {}
        if self.pending_alerts:
            alerts, self.pending_alerts = self.pending_alerts, []
            try:
                with transaction.atomic():  # a savepoint: on PostgreSQL a refused INSERT aborts the transaction
                    Alert.objects.bulk_create(alerts)
            except DatabaseError:
                # One at a time, each under its rule: the rule whose alert the database refuses (a row written
                # meanwhile, a bug) is taken out of the batch, as when each alert was written as it fired.
                for alert in alerts:
                    with _blamed(alert.rule), transaction.atomic():
                        alert.save(force_insert=True)
        if self.pending_changes:
            record_changes(self.pending_changes)
            self.pending_changes = []

    def close_alert(self, alert, step):
        alert.state, alert.resolved_at = AlertState.RESOLVED, self.now
        if alert.pk is not None:  # else it is written resolved (flush)
            self.alert_updates.setdefault(alert.pk, (alert, {}))[1].update(state=AlertState.RESOLVED, resolved_at=self.now)
        self.pending_changes.append(AlertChange(alert=alert, kind=ChangeKind.RESOLVED, step=step, at=self.now,
                                                receipt=self.receipt_at(step)))

    def receipt_at(self, step):
        """The batch a change at `step` is recorded against: of several judged together, the first to bring that
        step in the attempt being judged (what came before a restart stays before it: reviews/chronicle.py
        reads causes in that order); else the latest."""
        if self.batches is None or len(self.batches) == 1 or not self.spans:
            return self.receipt
        for first, last, receipt_id in self.spans.get(self.attempt_now, ()):
            if first <= step <= last:
                return self.batches.by_pk[receipt_id]
        return self.receipt

    def progress(self, rule, component, metric):
        key = (rule.pk, component, metric)
        if key not in self.progress_rows:
            self.progress_rows[key] = RuleProgress(rule=rule, run=self.run, component=component, metric=metric)
        self.touched.add(key)
        return self.progress_rows[key]

    def save_progress(self):
        touched = [self.progress_rows[key] for key in self.touched]
        old = [(p.pk, {f: getattr(p, f) for f in PROGRESS_FIELDS}) for p in touched
               if p.pk is not None and _changed(p)]
        RuleProgress.objects.bulk_create([p for p in touched if p.pk is None])
        update_rows(RuleProgress, old)

    def reference_points(self, series, lo, hi, margin):
        if not self.reference_runs:
            return []
        key = (series.metric, series.component, margin)
        if key not in self.reference_cache:
            self.reference_cache[key] = []
            for ref in Series.objects.filter(run_id__in=self.reference_runs, metric=series.metric, component=series.component):
                # The whole batch's span at once: one read per reference series per batch.
                s, v, _ = read_points(ref, self.batches.min_step - margin, self.batches.max_step + margin)
                self.reference_cache[key].append((s, v))
        return self.reference_cache[key]

    def stale_series(self, rules):
        """Absence rules with `behind_steps`: a series of theirs that this batch left behind (it sent nothing
        while the run moved on) is held, and its alert extended while it stays silent; its next point
        resolves it (alerts/evaluation.py _absence)."""
        end = self.batches.max_step
        if end is None:
            return
        in_batch = self.batch_series if self.batch_series is not None else set(
            Block.objects.filter(receipt_id__in=self.batches.ids).values_list("series_id", flat=True))
        for rule in rules:
            if rule.pk in self.invalid:
                continue
            with _blamed(rule):
                behind_steps = rule_params(rule).get("behind_steps")
                if behind_steps is None:
                    continue
                for series in self.run_series_list():
                    if series.pk in in_batch or series.max_step < 0 or not self.selects(rule, series):
                        continue
                    key = (rule.pk, series.component, series.metric)
                    stored = self.progress_rows.get(key)
                    state = (stored.state or {}) if stored is not None else {}
                    if state.get("batches", 0) < 2:
                        continue  # its own interval is not known yet
                    behind = end - series.max_step
                    progress = self.progress(rule, series.component, series.metric)
                    progress.state = {**state, "behind": max(behind, state.get("behind", 0))}
                    limit = max(behind_steps, 5 * state.get("cadence", 1), 2 * state.get("caught_up", 0))
                    if behind > limit:
                        self.fire_or_extend(rule, series.component, series.metric, "", series.max_step + 1, end,
                                            float(behind), "steps without data while the run went on")

    def end_silences(self, rules):
        """Any batch is data again: close the sweep's silent alerts, and don't count the silence twice as a gap."""
        by_pk = {r.pk: r for r in rules}
        for (rule_pk, component), alert in list(self.open_alerts.items()):
            if alert.condition != SILENT:
                continue
            with _blamed(by_pk[rule_pk]):
                self.resolve(by_pk[rule_pk], component,
                             self.batches.min_step if self.batches.min_step is not None else alert.last_step)
                for key, progress in self.progress_rows.items():
                    if key[0] == rule_pk and progress.state:
                        progress.state = {**progress.state, "last_time": None}
                        self.touched.add(key)

    def sample_band(self, rule, series, steps, band):
        """Keep the band at the last judged point of each rollup bucket (the newest attempt's wins): of the points
        whose band is known (a band rule works its edges out only where it needs them: judged_band's exact_at)."""
        judged = np.flatnonzero(np.isfinite(band.centre) & ~np.isnan(band.upper))
        if not len(judged):
            return
        last = judged[_bucket_ends(steps[judged])]
        # Rows of BAND_SAMPLE_COLUMNS, not model instances: most are replaced by a later one of their bucket.
        for step, centre, lower, upper in zip(steps[last].tolist(), band.centre[last].tolist(),
                                              band.lower[last].tolist(), band.upper[last].tolist()):
            bucket = step // ROLLUP_WIDTH
            self.band_samples[(rule.pk, series.pk, bucket)] = (rule.pk, series.pk, bucket, step, centre,
                                                               db_float(lower), db_float(upper))

    def save_band_samples(self):
        if self.band_samples and not _upsert_band_samples(list(self.band_samples.values())):
            columns = [column for column, _ in BAND_SAMPLE_COLUMNS]
            BandSample.objects.bulk_create(
                [BandSample(**dict(zip(columns, row))) for row in self.band_samples.values()], update_conflicts=True,
                unique_fields=["rule", "series", "bucket"], update_fields=["step", "centre", "lower", "upper"],
            )

    def persisted(self, rule, progress, step, when) -> bool:
        """The rule's persistence, and its `persistence_seconds` by the points' own time where it has one."""
        need = rule.persistence
        if "points" in need:
            held = progress.held_points >= need["points"]
        elif "steps" in need:
            held = step - progress.held_since_step + 1 >= need["steps"]
        else:
            held = when - progress.held_since_time >= need["seconds"]
        return held and when - progress.held_since_time >= self.persistence_seconds(rule)

    def persistence_seconds(self, rule) -> float:
        pk = rule.pk
        if pk not in self.seconds_needed:
            params = rule_params(rule) if rule.kind in (RuleKind.BAND, RuleKind.THRESHOLD) else {}
            self.seconds_needed[pk] = params.get("persistence_seconds") or 0
        return self.seconds_needed[pk]

    def fire_or_extend(self, rule, component, metric, condition, first_step, step, magnitude, unit):
        alert = self.open_alerts.get((rule.pk, component))
        if alert is None:
            phase = self.phases.at(first_step, prefer=rule.scope.get("phases"))
            alert = self.create_alert(
                rule=rule, run=self.run, component=component, metric=metric, condition=condition,
                first_step=first_step, last_step=step, fired_step=step, magnitude=magnitude, magnitude_unit=unit,
                phase=phase.phase if phase else "", fired_at=self.now,
            )
            self.open_alerts[(rule.pk, component)] = alert
            self.extended.add(id(alert))
            return
        updates = {}
        if step > alert.last_step:
            updates["last_step"] = alert.last_step = step
        if first_step < alert.first_step:
            # Another metric of the same component held earlier in this batch (blocks are judged
            # metric by metric): the alert begins where the earliest of them began, whatever the batching.
            updates["first_step"] = alert.first_step = first_step
            updates["metric"] = alert.metric = metric
            phase = self.phases.at(first_step, prefer=rule.scope.get("phases"))
            updates["phase"] = alert.phase = phase.phase if phase else ""
        if magnitude is not None and (alert.magnitude is None or magnitude > alert.magnitude):
            updates["magnitude"] = alert.magnitude = magnitude
        self.update_alert(alert, updates, step)

    def resolve(self, rule, component, step):
        alert = self.open_alerts.pop((rule.pk, component), None)
        if alert is not None:
            self.close_alert(alert, step)

    def batch_blocks(self):
        """The batch's blocks, attempts in the order they began (a batch can hold the end of one and the start of the next).

        Read as plain rows, each naming the run's one Series object (series_named's): an evaluation of 50 batches
        of 70 series built two model instances a block (some 8% of its time under cProfile)."""
        rows = Block.objects.filter(receipt_id__in=self.batches.ids).order_by("attempt", "id").values_list(
            "series_id", "attempt", "receipt_id", "first_step", "last_step", "data")
        series_of = {s.pk: s for s in self.run_series_list()}
        return [StoredBlock(series_of[series_id], *rest) for series_id, *rest in rows]

    def unpacked(self, block):
        """The block's (steps, values, times), unpacked once an evaluation."""
        found = self.unpacked_now.get(id(block))
        if found is None:
            found = self.unpacked_now[id(block)] = unpack(block.data)
        return found

    def batch_blocks_by_series(self, series_pks):
        """{series pk: [(attempt, steps, values)]} of every block this evaluation's batches stored of those series,
        or None when they are not all at hand (a backtest reads only the series its rule selects)."""
        if self.blocks_now is None:
            return None
        out = {pk: [] for pk in series_pks}
        for block in self.blocks_now:
            if block.series.pk in out:
                steps, values, _ = self.unpacked(block)
                out[block.series.pk].append((block.attempt, steps, values))
        return out

    def points(self, rules):
        blocks = self.blocks_now = self.batch_blocks()
        self.batch_series = {b.series.pk for b in blocks}  # stale_series: who sent something in this batch
        if len(self.batches) > 1:
            # Each batch's steps per attempt, in arrival order (receipt_at).
            spans = {}
            for block in blocks:
                key = (block.attempt, block.receipt_id)
                first, last = spans.get(key, (block.first_step, block.last_step))
                spans[key] = (min(first, block.first_step), max(last, block.last_step))
            self.spans = defaultdict(list)
            for (attempt, receipt_id), (first, last) in sorted(spans.items(), key=lambda item: item[0][1]):
                self.spans[attempt].append((first, last, receipt_id))
        chosen_of, merged = {}, {}
        for block in blocks:
            series = block.series
            if series.pk not in chosen_of:
                chosen_of[series.pk] = [r for r in rules if self.selects(r, series)]
            if not chosen_of[series.pk]:
                continue
            steps, values, times = self.unpacked(block)
            if times is None:  # a block without times: its batch's arrival
                times = np.full(len(steps), self.batches.by_pk[block.receipt_id].received_at.timestamp())
            # A series' blocks of several batches judged together are judged as one (alerts/batches.py).
            merged.setdefault((block.attempt, series.pk), (block.attempt, series, []))[2].append((steps, values, times))
        # Within an attempt, causes before symptoms: alerts fired at one step are created in this order.
        parts = sorted(merged.values(), key=lambda m: (m[0], CAUSAL_RANK.get(m[1].metric, len(CAUSAL_RANK))))
        jobs = []
        for index, (attempt, series, pieces) in enumerate(parts):
            steps, values, times = pieces[0] if len(pieces) == 1 else (np.concatenate(p) for p in zip(*pieces))
            info = self.phases.of(steps)
            for rule in chosen_of[series.pk]:
                if rule.pk in self.invalid:
                    self.faults.setdefault(rule.pk, self.invalid[rule.pk])
                    continue
                with _blamed(rule):
                    progress = self.progress(rule, series.component, series.metric)
                    flags = self.flags(rule, progress, series, steps, values, times, info, attempt)
                    if flags.band is not None:
                        self.sample_band(rule, series, steps, flags.band)
                self.judged.add(rule.pk)
                jobs.append((rule, progress, series, steps, times, flags))
            if index + 1 == len(parts) or parts[index + 1][0] != attempt:
                self.attempt_now = attempt
                self.persist_in_step_order(jobs)
                jobs = []

    def selects(self, rule, series) -> bool:
        try:
            return series_selected(rule, series.metric, series.component, series.layer)
        except Exception as exc:
            if rule.pk in self.invalid:
                return True  # its scope is what is broken: recorded as such where it may apply
            raise RuleFailed(rule) from exc

    def persist_in_step_order(self, jobs):
        """Persistence and alerts over every judged point of the batch, step by step (causes first within a
        step), not series by series: which alert fires first, and where each begins, must not depend on how
        the job cut its telemetry into batches.

        Only (rule, component)s with a held point or an open alert can change an alert: the others' points
        just count as clear, all at once. A series alone in its (rule, component) and held at every point
        goes through the step-by-step loop only up to the point its alert fires or is extended: after it,
        its points extend that alert and nothing else (held_throughout). So does a series held at every point
        from some step on (a fault that began in this batch, or in batches judged together), from the point
        its alert fires or is extended there, once no series of its (rule, component) has a point left that
        is not held (nothing is left that could resolve the alert)."""
        if not jobs:
            return
        busy = {(rule.pk, series.component) for rule, _, series, _, _, flags in jobs if flags.held.any()}
        busy |= {key for key in ((rule.pk, series.component) for rule, _, series, *_ in jobs) if key in self.open_alerts}
        alone = Counter((rule.pk, series.component) for rule, _, series, *_ in jobs)
        keys, listed, tails = [], {}, []
        held_from = {}  # job: (position in its loop order from which every point is held, that order)
        members = defaultdict(list)  # (rule, component): its jobs in the loop
        for j, (rule, progress, series, steps, times, flags) in enumerate(jobs):
            if (rule.pk, series.component) not in busy:
                try:
                    self.all_clear(rule, progress, steps, times, flags)
                except Exception as exc:
                    raise RuleFailed(rule) from exc
                continue
            n = len(steps)
            # Python lists: indexing a numpy array point by point costs more than the rest of the loop.
            timed = self.persistence_seconds(rule) > 0
            listed[j] = (rule, progress, series, steps.tolist(), times.tolist(), _Listed(flags, timed))
            index = np.arange(n)
            if alone[(rule.pk, series.component)] == 1 and not timed and flags.held.all():
                within = np.lexsort((index, steps))  # the series' points in the loop's order
                try:
                    k = self.first_persisted(rule, progress, listed[j][3], listed[j][4], within.tolist())
                except Exception as exc:
                    raise RuleFailed(rule) from exc
                if k is not None and k + 1 < n:
                    index = within[:k + 1]
                    tails.append((j, within[k + 1:].tolist()))
            elif not timed and "seconds" not in rule.persistence and flags.held.any():
                within = np.lexsort((index, steps))
                # A point not judged (neutral: an eval step a rule skips, a value its band cannot take) changes
                # nothing in the loop: only a judged point that is not held ends a held stretch.
                clear = ~flags.held[within] if flags.neutral is None else ~flags.held[within] & ~flags.neutral[within]
                clear = np.flatnonzero(clear)
                if not len(clear) or clear[-1] + 1 < n:  # held at its last judged points
                    held_from[j] = (int(clear[-1]) + 1 if len(clear) else 0, within)
            members[(rule.pk, series.component)].append(j)
            rank = CAUSAL_RANK.get(series.metric, len(CAUSAL_RANK))
            keys.append(np.stack([steps[index], np.full(len(index), rank), np.full(len(index), j), index], axis=1))
        if not keys:
            return
        points = np.concatenate(keys)
        order = np.lexsort((points[:, 3], points[:, 2], points[:, 1], points[:, 0]))
        reached = dict.fromkeys(listed, 0)  # points of each job through the loop so far
        # In chunks, leaving out the points of jobs that went over to their tails since the last chunk: a storm's
        # jobs tail within a few points, and stepping over the rest one by one was most of this loop.
        rows, tailing, left_out = points[order], set(), 0
        while len(rows):
            if len(tailing) > left_out:
                rows = rows[~np.isin(rows[:, 2], list(tailing))]
                left_out = len(tailing)
            chunk, rows = rows[:PERSIST_CHUNK], rows[PERSIST_CHUNK:]
            for _, _, j, i in chunk.tolist():
                if j in tailing:
                    continue
                try:  # inline, not _blamed(): this runs once per point and rule
                    self.persist_point(*listed[j], i)
                    reached[j] += 1
                    if j in held_from and reached[j] > held_from[j][0] and self.tails_from(j, i, listed, held_from, reached, members, tailing):
                        rest = held_from[j][1][reached[j]:]
                        tails.append((j, rest[jobs[j][5].held[rest]].tolist()))  # its neutral points change nothing
                        tailing.add(j)
                except NOT_A_RULES_FAULT:
                    raise
                except Exception as exc:
                    raise RuleFailed(jobs[j][0]) from exc
        for j, tail in tails:
            try:
                self.held_throughout(jobs[j], listed[j][5].units, tail)
            except NOT_A_RULES_FAULT:
                raise
            except Exception as exc:
                raise RuleFailed(jobs[j][0]) from exc

    def tails_from(self, j, i, listed, held_from, reached, members, tailing) -> bool:
        """After held point i of job j, inside the stretch where the job is held at every point: whether its
        remaining points can only extend its alert (persisted here and the alert open, and no job of its
        (rule, component) with a point left that is not held), so they need not go through the loop."""
        rule, progress, series, steps, times, flags = listed[j]
        if reached[j] >= len(held_from[j][1]) or not flags.held[i]:
            return False  # nothing left, or a point not judged (before it, the stretch may not have begun)
        if (rule.pk, series.component) not in self.open_alerts or not self.persisted(rule, progress, steps[i], times[i]):
            return False
        return all(k == j or k in tailing or (k in held_from and reached[k] >= held_from[k][0])
                   for k in members[(rule.pk, series.component)])

    @staticmethod
    def first_persisted(rule, progress, steps, times, order):
        """Where in `order` a series held at every point first meets its rule's persistence (persist_point
        without persistence_seconds), or None (persistence in seconds, or not met in this batch)."""
        need = rule.persistence
        held, since_step, since_time = progress.held_points, progress.held_since_step, progress.held_since_time
        for position, i in enumerate(order):
            step, when = steps[i], times[i]
            if held == 0:
                since_step, since_time = step, when
            held += 1
            if "points" in need:
                met = held >= need["points"]
            elif "steps" in need:
                met = step - since_step + 1 >= need["steps"]
            else:
                return None
            if met and when - since_time >= 0:
                return position
        return None

    def held_throughout(self, job, units, tail):
        """persist_point over held points, in order, after the series' alert has fired or been extended in this
        batch: once persisted, every point stays persisted (but for a point timed before its stretch began),
        so together they extend the alert to their last step and their largest magnitude. A storm's tails are
        most of its points: taken a column at a time (`units`: the job's units listed)."""
        rule, progress, series, steps, times, flags = job
        tail = np.asarray(tail, dtype=np.intp)
        held_before = progress.held_points
        progress.held_points += len(tail)
        progress.clear_points = 0
        with np.errstate(invalid="ignore"):
            counted = np.flatnonzero(~(times[tail] - progress.held_since_time < 0))
        if not len(counted):
            return
        if rule.kind == RuleKind.NONFINITE:  # its magnitude: the held points so far, at each point
            magnitudes = (held_before + 1 + counted).astype(float)
        else:
            magnitudes = flags.magnitude[tail[counted]].astype(float)
        finite = magnitudes[np.isfinite(magnitudes)]
        largest = float(finite.max()) if len(finite) else None
        self.fire_or_extend(rule, series.component, series.metric, "", progress.held_since_step,
                            int(steps[tail[counted]].max()), largest, units[int(tail[counted[-1]])])

    def all_clear(self, rule, progress, steps, times, flags):
        """persist_point over a series' points none of which is held, its (rule, component) without an open alert."""
        counted = np.ones(len(steps), dtype=bool) if flags.neutral is None else ~flags.neutral
        if not counted.any():
            return  # nothing judged: a stretch in progress goes on
        progress.held_points = 0
        if self.persistence_seconds(rule) > 0:
            judged_steps = np.where(counted, steps, np.iinfo(np.int64).min)
            last = int(np.flatnonzero(judged_steps == judged_steps.max())[-1])  # the last judged point in step order
            progress.held_since_time = float(times[last])
        if flags.clears is not None:
            counted &= flags.clears
        progress.clear_points += int(np.count_nonzero(counted))

    def series_named(self, metric, component):
        """The run's series (one query for all of them, the first time one is asked for)."""
        if self.run_series is None:
            self.run_series = {(s.metric, s.component): s for s in Series.objects.filter(run=self.run)}
        return self.run_series.get((metric, component))

    def read_points(self, series, lo, hi):
        """read_points(series, lo, hi), served from one read of every series of the run with the same metric
        (the first one asked for sets the span; what falls outside it is read on its own)."""
        key = (getattr(self.receipt, "pk", None), series.metric)
        if key not in self.metric_points:
            same = [s for s in self.run_series_list() if s.metric == series.metric]
            # The batch's span and the step before it: what each series' judging of this batch asks for.
            if self.batches is not None and self.batches.min_step is not None:
                lo, hi = min(lo, self.batches.min_step - 1), max(hi, self.batches.max_step)
            # The batches being judged are in memory already: only the blocks of others are read (the one before).
            known = self.batch_blocks_by_series([s.pk for s in same])
            besides = None if known is None else (self.batches.ids, known)
            self.metric_points = {key: (lo, hi, read_points_of_many(same, lo, hi, stream=False, besides=besides))}  # the latest batch's only
        start, end, points = self.metric_points[key]
        if lo < start or hi > end or series.pk not in points:
            return read_points(series, lo, hi, stream=False)
        steps, values, attempts = points[series.pk]
        keep = (steps >= lo) & (steps <= hi)
        return steps[keep], values[keep], attempts[keep]

    def run_series_list(self):
        self.series_named("", "")
        return list(self.run_series.values())

    def attempt(self, number):
        if number not in self.attempt_starts:
            self.attempt_starts[number] = (
                Attempt.objects.filter(run=self.run, number=number).values_list("start_step", flat=True).first()
            )
        return number, self.attempt_starts[number]

    def flags(self, rule, progress, series, steps, values, times, info, attempt):
        if rule.kind == RuleKind.NONFINITE:
            return _nonfinite(rule, progress, steps, values, info)
        if rule.kind == RuleKind.THRESHOLD:
            return _threshold(rule, steps, values, info)
        if rule.kind == RuleKind.BAND:
            if rule.pk not in self.band_judges:
                self.band_judges[rule.pk] = _BandJudge(rule, self)
            return self.band_judges[rule.pk](progress, series, steps, values, info, self.attempt(attempt))
        if rule.kind == RuleKind.ABSENCE:  # its params were validated with the rule's (evaluate_rules)
            return _absence(rule, progress, series, steps, times, self.attempt(attempt))
        if rule.kind == RuleKind.WEIGHT_JUMP:
            return _weight_jump(rule, progress, series, steps, values, self.attempt(attempt), self)
        if rule.kind == RuleKind.REFERENCE:
            return _reference(rule, series, steps, values, info, self)
        return _divergence(rule, progress, self.run, steps, values)

    def persist_point(self, rule, progress, series, steps, times, flags, i):
        component = series.component
        step = int(steps[i])
        when = float(times[i])
        timed = flags.timed if flags.timed is not None else self.persistence_seconds(rule) > 0
        if flags.neutral is not None and flags.neutral[i] and not flags.held[i]:
            return
        if flags.held[i]:
            if progress.held_points == 0:
                # With persistence in time, the stretch began when the last clear point came (a point's
                # time is the end of its step): ten held steps of 3 ms are 30 ms, not 27.
                since = progress.held_since_time if timed and progress.held_since_time is not None else None
                progress.held_since_step = step
                progress.held_since_time = since if since is not None and since <= when else when
            progress.held_points += 1
            progress.clear_points = 0
            if self.persisted(rule, progress, step, when):
                magnitude = float(flags.magnitude[i])
                if rule.kind == RuleKind.NONFINITE:
                    magnitude = float(progress.held_points)
                magnitude = magnitude if math.isfinite(magnitude) else None
                self.fire_or_extend(rule, component, series.metric, "", progress.held_since_step, step, magnitude, flags.units[i])
        else:
            if progress.held_points:
                progress.held_points = 0
            if timed:
                progress.held_since_time = when  # where a held stretch after it begins
            if flags.clears is not None and not flags.clears[i]:
                return
            progress.clear_points += 1
            open_alert = self.open_alerts.get((rule.pk, component))
            # Only the metric the alert is about clears it: one clear metric must not close
            # what another metric of the component still shows.
            if (progress.clear_points >= rule.persistence.get("resolve_points", 1) and open_alert is not None
                    and open_alert.metric in ("", series.metric)):
                self.resolve(rule, component, step)

    def events(self, rules):
        for event in Event.objects.filter(receipt_id__in=self.batches.ids).order_by("step", "id"):
            for rule in rules:
                if not _event_counts(rule, event):
                    continue
                magnitude = np.nan if event.magnitude is None else event.magnitude
                self.fire_or_extend(rule, event.component, "", event.condition, event.step, event.step,
                                    float(magnitude) if np.isfinite(magnitude) else None, "event magnitude")
        self.end_events(rules)

    def end_events(self, rules):
        """Events that ended (Alertmanager's resolved notifications): an alert ends when none of its events is
        still open. Job-reported events are instants, never open; so are events no rule counts.

        The events this batch ended, and this batch's own events that have ended already (its resolved
        notification was evaluated first), so the order batches are evaluated in cannot leave an alert open.
        """
        ended = Event.objects.filter(Q(ended_by_id__in=self.batches.ids) | Q(receipt_id__in=self.batches.ids, ended_at__isnull=False))
        ended = list(ended.order_by("step", "id"))
        if not ended:
            return
        still_open = list(Event.objects.filter(run=self.run, source=EventSource.ALERTMANAGER, ended_at__isnull=True,
                                               component__in={e.component for e in ended}))
        for event in ended:
            for rule in rules:
                if (rule.pk, event.component) not in self.open_alerts or not _event_counts(rule, event):
                    continue
                if any(e.component == event.component and _event_counts(rule, e) for e in still_open):
                    continue
                self.resolve(rule, event.component, max(event.step, self.batches.max_step or 0))


def _event_counts(rule, event) -> bool:
    """Whether an event rule takes this event: its condition and component are in scope, its magnitude high enough."""
    if event.condition not in (rule.scope.get("conditions") or []):
        return False
    if not fnmatchcase(event.component, rule.scope.get("component", "*")):
        return False
    magnitude = np.nan if event.magnitude is None else event.magnitude
    return bool(magnitude >= rule.params.get("min_magnitude", -np.inf))


def evaluate_rules(receipts, run) -> bool:
    """Judge the batch (or a run's batches judged together, alerts/batches.py) against the project's enabled
    rules; True when the run has an open alert after it.

    Fault-isolated: a rule whose stored settings do not validate is not judged,
    and a rule that raises has everything this batch did rolled back (a
    savepoint) and the batch judged again without it; either is recorded
    (alerts/faults.py) and the other rules' alerts fire as if it were not there.
    Only the database failing fails the batch, for the sweep to retry.
    """
    batches = Batches.of(receipts)
    receipt = batches.latest  # what faults are recorded against
    rules, invalid = _rules_for(run)
    failed = {}
    while True:
        try:
            with transaction.atomic():
                evaluator = _judge(batches, run, [r for r in rules if r.pk not in failed], invalid)
            break
        except RuleFailed as exc:
            cause = exc.__cause__
            log.error("rule %s of project %s (id %s) failed on batch %s of run %s and is skipped for it",
                      exc.rule.name, run.project_id, exc.rule.pk, receipt.pk, run.run_id,
                      exc_info=(type(cause), cause, cause.__traceback__))
            failed[exc.rule.pk] = faults.error_text(cause)
    by_pk = {r.pk: r for r in rules}
    for rule_pk, why in evaluator.faults.items():
        log.warning("rule %s (id %s) not judged on batch %s of run %s: %s", by_pk[rule_pk].name, rule_pk, receipt.pk, run.run_id, why)
    faults.record_failures(receipt, run, {by_pk[pk]: why for pk, why in {**evaluator.faults, **failed}.items()})
    faults.record_recoveries(receipt, run, [by_pk[pk] for pk in evaluator.judged if pk not in failed])
    return Alert.objects.filter(run=run).exclude(state=AlertState.RESOLVED).exists()


def _rules_for(run):
    """The project's enabled rules that cover the run, and {rule pk: why} for those evaluation cannot read."""
    rules, invalid = [], {}
    for rule in faults.with_last_fault(Rule.objects.filter(project_id=run.project_id, enabled=True)):
        errors = judging_errors(kind=rule.kind, scope=rule.scope, persistence=rule.persistence, params=rule.params)
        if errors:
            invalid[rule.pk] = faults.invalid_text(errors)
        try:
            if not _run_selected(rule, run):
                continue
        except Exception:  # noqa: BLE001 - a broken scope; `invalid` says why
            pass
        rules.append(rule)
    return rules, invalid


def _conditions_of(rule):
    """The event conditions a rule's scope names; None when its scope is too broken to say."""
    try:
        return set(rule.scope.get("conditions") or [])
    except (AttributeError, TypeError):
        return None


def _judge(receipts, run, rules, invalid, evaluator=None):
    """One batch (or several, alerts/batches.py) through the rules; `evaluator` is a backtest's replay evaluator
    (alerts/backtest.py), else a live one."""
    evaluator = evaluator or _Evaluator(receipts, run, rules, invalid)
    batches = evaluator.batches
    evaluator.end_silences(rules)
    point_rules = [r for r in rules if r.kind in POINT_KINDS]
    if point_rules:
        evaluator.points(point_rules)
        evaluator.stale_series([r for r in point_rules if r.kind == RuleKind.ABSENCE])
        evaluator.save_progress()
        evaluator.save_band_samples()
    event_rules = [r for r in rules if r.kind == RuleKind.EVENT]
    # The batch's own events, and those it ended (an Alertmanager resolved notification brings no new event).
    concerned = Event.objects.filter(Q(receipt_id__in=batches.ids) | Q(ended_by_id__in=batches.ids))
    conditions = set(concerned.values_list("condition", flat=True)) if event_rules else set()
    for rule in event_rules:
        wanted = _conditions_of(rule)
        if not conditions or (wanted is not None and not conditions & wanted):
            continue  # no event of this batch is the rule's
        if rule.pk in invalid:
            evaluator.faults.setdefault(rule.pk, invalid[rule.pk])
            continue
        with _blamed(rule):  # one rule at a time, so one that raises is the one taken out
            evaluator.events([rule])
        evaluator.judged.add(rule.pk)
    evaluator.flush()
    return evaluator


class _ChartContext:
    """What a band judge needs from an evaluator, for drawing a stored series."""

    def __init__(self, run):
        self.run = run
        self.reference_runs = list(
            Run.objects.filter(project_id=run.project_id, reference=True).exclude(pk=run.pk).values_list("pk", flat=True)
        )
        self.cache = {}

    def series_named(self, metric, component):
        return Series.objects.filter(run=self.run, metric=metric, component=component).first()

    @staticmethod
    def read_points(series, lo, hi):
        return read_points(series, lo, hi)

    def reference_points(self, series, lo, hi, margin):
        if not self.reference_runs:
            return []
        key = (series.metric, series.component)
        if key not in self.cache:
            self.cache[key] = [read_points(ref, None, None)[:2] for ref in
                               Series.objects.filter(run_id__in=self.reference_runs, metric=series.metric, component=series.component)]
        return self.cache[key]


def chart_band(series, rule, start=None, end=None, every=1):
    """The band `rule` judged each stored point of `series` with, as a chart draws it: (steps, centre, lower, upper).

    The rule's own judge replays the series' newest attempt in step order from
    a few windows before `start` (so excursions kept out of the history are
    kept out here too, and restarts get their restore tolerance).
    """
    try:
        judge = _BandJudge(rule, _ChartContext(series.run), band_everywhere=True)
    except InvalidParams:
        # The rule judged nothing with these params (its page shows it broken): there is no band to draw.
        empty = np.array([])
        return empty.astype(np.int64), empty, empty, empty
    margin = 20 * judge.params.window
    steps, values, _ = read_points(series, None if start is None else max(0, start - margin), end)
    phases = PhaseIndex(series.run)
    restarts = list(Attempt.objects.filter(run=series.run, number__gt=1).exclude(start_step=None).values_list("start_step", flat=True))
    progress = RuleProgress(rule=rule, run=series.run, component=series.component, metric=series.metric)
    flags = judge(progress, series, steps, values, phases.of(steps), (1, None), restarts=restarts)
    shown = np.flatnonzero(steps >= (start or 0))[::max(1, every)]
    return steps[shown], flags.band.centre[shown], flags.band.lower[shown], flags.band.upper[shown]
