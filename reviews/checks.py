"""Steps 1-5 of a run review, filled from the stored data (issue 12).

`fill(review)` returns the five steps as they stand now; each step is also its own function
(identity, invariants, expectation, slices, remaining_value) taking the review and an optional shared
`Context`, so the page can show them one by one. Every step is a dict:

    {"number": 1..5, "state": StepState value, "summary": one line in words,
     "findings": {"columns": [[key, heading], ...], "rows": [{key: value, ...}, ...],
                  "sections": [{"key", "title", "columns", "rows", "empty"}, ...], ...step extras},
     "evidence": [{"label": str, "href": str}, ...]}

`findings["columns"]/["rows"]` is the step's main table; `sections` are further tables, each with the
same shape plus a title and the words to show when it has no rows. A row may carry "highlight": true
(not a column): what changed since the last review. Every value is JSON: non-finite numbers are written
as the wire contract writes them ("NaN", "Infinity", "-Infinity"), never as floats.

"Since the last review" means steps after `review.previous.opened_step` and changes after
`review.previous.opened_at`; without a previous review it means the whole run.

Reads are bounded: summaries (Series, Block and Rollup aggregates) for whole-run questions, raw points
only for bounded windows (the fit window, a gap scan of at most GAP_SCAN_MAX_STEPS steps, a few
comparison windows per run), and numpy on those arrays.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone as dt_timezone
from urllib.parse import urlencode

import numpy as np
from django.db.models import F, Max, Min, Q, Sum
from django.urls import reverse

from alerts.models import Alert, AlertState, RuleKind
from ingest.models import ROLLUP_WIDTH, Block, Phase, Rollup, Run, RunStatus, Series
from ingest.phases import IMPLICIT_WARMUP_SHARE, phase_spans
from ingest.storage import read_point_times, read_points, read_points_of_many, unpack
from ingest.wire import wire_value
from reviews.models import StepState
from reviews.templatetags.words import words
from runs.detail import HEADLINE_METRICS, budget_words

# ---------------------------------------------------------------------------------------------------
# Settings of the checks (named, so the page and the tests can say what was used).

# Step 2: a component of a metric lags when its last step is this far behind the metric's newest step,
# or its last point's time this far behind the newest time (a stalled rank or node).
SYNC_LAG_STEPS = 100
SYNC_LAG_SECONDS = 300.0
# Data contracts: metric -> (direction, threshold). Only where a number means trouble on any job:
# a corrupt record is always one too many; more than 5% duplicates means the loader re-reads data.
# mask_rate, label_rate and data_wait depend on the job: they are judged by their alerts (bands) only.
DATA_CONTRACT_METRICS = ("mask_rate", "label_rate", "dup_rate", "corrupt_records", "data_wait")
DATA_THRESHOLDS = {"corrupt_records": ("above", 0.0), "dup_rate": ("above", 0.05)}
# A checkpoint is missed when the steps since the last one exceed this many usual intervals.
CHECKPOINT_MISSED_FACTOR = 1.5
# Gaps are found in the raw points for windows up to this many steps, in the rollups beyond
# (then only gaps of whole rollup buckets, ROLLUP_WIDTH steps, are seen).
GAP_SCAN_MAX_STEPS = 200_000
MAX_ROWS = 50

# Step 3: band-like alerts (the run against its expected behaviour), and the comparison with references.
EXPECTATION_RULE_KINDS = (RuleKind.BAND, RuleKind.DIVERGENCE, RuleKind.WEIGHT_JUMP, RuleKind.REFERENCE)
REFERENCE_LIMIT = 5  # newest reference runs beside the run when the reviewer chose none
COMPARE_WINDOW_STEPS = 50  # each compared value is the mean of the finite values of this many steps up to it
COMPARE_POINTS = (0.25, 0.5, 0.75, 1.0)  # where the run is compared: shares of the newest common step
# Attention when the run is worse than its reference(s) by more than this share at the newest common step.
EXPECTATION_WORSE_SHARE = 0.10

# Step 4: which way is better, by the metric's name (the last part of eval/<slice>/<metric>).
LOWER_IS_BETTER = ("loss", "error", "err", "perplexity", "ppl", "wer", "cer", "mse", "mae", "rmse", "nll")
HIGHER_IS_BETTER = ("accuracy", "acc", "f1", "auc", "bleu", "rouge", "score", "precision", "recall", "exact_match", "em", "map")
SLICE_PREFIXES = ("eval", "val")
AGGREGATE_SLICES = ("all", "overall")  # a slice of these names stands for the aggregate when no eval/<metric> is sent
SLICE_WORSE_FACTOR = 1.5
SLICE_CHANGE_TOLERANCE = 0.01  # changes smaller than 1% of the earlier value are "unchanged"
MAX_SLICE_SERIES = 500  # sliced series judged (by name); more are left out and counted

# Step 5: the saturating fit y = a + b * (step / s)^-c on the current regime's history.
FIT_MIN_POINTS = 20
FIT_BINS = 100  # the history is averaged into this many step bins before fitting (noise is not trend)
FIT_MIN_R2 = 0.5
FIT_EXPONENTS = np.geomspace(0.01, 3.0, 120)  # the coarse grid of c (refined between neighbours)
FIT_BOOTSTRAP = 200
FIT_INTERVAL = (2.5, 97.5)  # percentiles of the bootstrapped projection: a 95% interval
FIT_AGREEMENT_INTERVAL = (0.5, 99.5)  # the band at the newest measured step the measured value must lie in
# No projection further beyond the fitted history than this many times its length.
EXTRAPOLATION_LIMIT = 4.0
RATE_SHARE = 0.2  # the recent improvement rate: a line through the last 20% of the fit window
# Phase kinds that start a new regime of the curve (the fit starts at the latest one);
# steady, eval, checkpoint and restart continue the regime they interrupt.
REGIME_KINDS = ("warmup", "steady", "lr_decay", "cooldown", "data_refresh")
REGIME_BREAKS = ("warmup", "lr_decay", "cooldown", "data_refresh")
GPU_COUNT_KEYS = ("gpus", "num_gpus", "n_gpus", "world_size")

# rewind_proposal: PaLM restarted ~100 steps before a spike's onset.
REWIND_MARGIN = 100


# ---------------------------------------------------------------------------------------------------
# Shared reading


@dataclass
class Context:
    """What every step reads, read once per fill."""

    review: object
    run: Run = field(init=False)
    since_step: int | None = field(init=False)
    since_at: datetime | None = field(init=False)
    newest: int | None = field(init=False)
    series: list = field(init=False)
    alerts: list = field(init=False)
    spans: list = field(init=False)

    def __post_init__(self):
        review = self.review
        self.run = Run.objects.select_related("project").get(pk=review.run_id)
        previous = review.previous
        self.since_step = previous.opened_step if previous is not None else None
        self.since_at = previous.opened_at if previous is not None else None
        run = self.run
        self.newest = run.attempt_max_step if run.attempt_max_step is not None else run.max_step
        self.series = list(Series.objects.filter(run=run).order_by("metric", "component"))
        self.by_key = {(s.metric, s.component): s for s in self.series}
        self.alerts = list(Alert.objects.filter(run=run).select_related("rule").order_by("first_step", "id"))
        self.spans = phase_spans(run)
        self.attempts = list(run.attempts.order_by("number"))
        names = {s.metric for s in self.series if not s.component}
        self.headline = next((m for m in HEADLINE_METRICS if m in names), None)
        detail = review.trigger_detail if isinstance(review.trigger_detail, dict) else {}
        chosen = detail.get("metric") if isinstance(detail.get("metric"), str) else None
        if chosen is None and review.alert_id and getattr(review.alert, "metric", ""):
            chosen = review.alert.metric if (review.alert.metric, review.alert.component) in self.by_key else None
        self.chosen = chosen or self.headline
        self.chosen_component = ""
        if review.alert_id and chosen and review.alert.metric == chosen:
            self.chosen_component = review.alert.component
        self.comparison = review.comparison if review.comparison_id else default_comparison(run)

    @property
    def attempt_start(self) -> int:
        current = self.attempts[-1] if self.attempts else None
        return current.start_step if current is not None and current.start_step is not None else 0

    def is_new(self, alert) -> bool:
        """Open, or begun or fired since the last review."""
        if alert.state != AlertState.RESOLVED:
            return True
        if self.since_step is None and self.since_at is None:
            return True
        return (self.since_step is not None and alert.first_step > self.since_step) or (
            self.since_at is not None and alert.fired_at > self.since_at)

    def phase_at(self, step):
        found = None
        for span in self.spans:
            if span.start <= step:
                found = span
        return found


def run_href(run, metric=None, component=None, start=None, end=None) -> str:
    """The run page at a series and step range (the page is asked to honour these parameters)."""
    params = {k: v for k, v in (("metric", metric), ("component", component), ("start", start), ("end", end))
              if v not in (None, "")}
    base = reverse("console:run", args=[run.run_id])
    return base + ("?" + urlencode(params) if params else "")


def alert_href(alert, run) -> str:
    params = {"state": "all", "project": run.project.slug, "rule": alert.rule_id}
    return reverse("console:inbox") + "?" + urlencode(params) + f"#alert-{alert.pk}"


def num(value):
    """A number as JSON: floats rounded to 6 significant digits, non-finite as the wire strings."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    if not math.isfinite(value):
        return wire_value(value)
    return float(f"{value:.6g}")


def jsonable(value):
    """Findings as plain JSON: numpy scalars unwrapped, non-finite floats as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (float, np.floating, np.integer, np.bool_)):
        return num(value)
    return value


def own_times(series, times, start=None, end=None) -> bool:
    """Whether the times read of `series` between `start` and `end` are the points' own.

    A point sent without its `time` is stored with its batch's time of receipt, so without own times there are
    no more distinct times than batches (blocks) read; coarse own times (whole seconds at many steps a second)
    still change within a batch.
    """
    times = np.asarray(times, dtype=np.float64)
    if len(times) < 2:
        return False
    blocks = Block.objects.filter(series=series)
    if start is not None:
        blocks = blocks.filter(last_step__gte=start)
    if end is not None:
        blocks = blocks.filter(first_step__lte=end)
    return len(np.unique(times)) > blocks.count()


def run_has_own_times(run) -> bool:
    """Whether the run's points carry their own times, judged on the newest points of its headline series (or its
    first series): a bounded read of at most GAP_SCAN_MAX_STEPS steps."""
    series = list(Series.objects.filter(run=run, component="").order_by("metric"))
    if not series:
        return False
    chosen = next((s for m in HEADLINE_METRICS for s in series if s.metric == m), series[0])
    newest = chosen.max_step if chosen.max_step >= 0 else None
    start = None if newest is None else max(0, newest - GAP_SCAN_MAX_STEPS)
    _, times = read_point_times(chosen, start=start, end=newest)
    return own_times(chosen, times, start, newest)


def fmt(value) -> str:
    value = num(value)
    if value is None:
        return "—"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def section(key, title, columns, rows, empty):
    return {"key": key, "title": title, "columns": [list(c) for c in columns], "rows": rows[:MAX_ROWS],
            "total": len(rows), "empty": empty}


def step_result(number, state, summary, findings, evidence):
    return {"number": number, "state": str(state), "summary": summary, "findings": jsonable(findings),
            "evidence": evidence[:MAX_ROWS]}


def fill(review) -> list[dict]:
    """Steps 1-5 for the review as they stand now."""
    ctx = Context(review)
    return [identity(review, ctx), invariants(review, ctx), expectation(review, ctx), slices(review, ctx),
            remaining_value(review, ctx)]


def default_comparison(run) -> Run | None:
    """The run's reference run: the newest reference run of its project (by last data), not itself."""
    return (Run.objects.filter(project_id=run.project_id, reference=True).exclude(pk=run.pk)
            .order_by(F("last_seen_at").desc(nulls_last=True), "-id").first())


# ---------------------------------------------------------------------------------------------------
# Checkpoints and the rewind proposal


def checkpoint_steps(run, attempts=None) -> list[int]:
    """Steps of the run's checkpoint phases on the history as it stands (sorted).

    A checkpoint written by an attempt at a step a later attempt went back over belongs to a
    history that was thrown away: it is left out.
    """
    attempts = attempts if attempts is not None else list(run.attempts.order_by("number"))
    starts = {a.number: a.start_step for a in attempts}
    kept = set()
    for step, attempt in Phase.objects.filter(run=run, kind="checkpoint").values_list("step", "attempt"):
        later = [s for n, s in starts.items() if n > attempt and s is not None]
        if all(step < s for s in later):
            kept.add(step)
    return sorted(kept)


def last_checkpoint_step(run) -> int | None:
    """The step of the run's latest checkpoint phase (on the history as it stands)."""
    steps = checkpoint_steps(run)
    return steps[-1] if steps else None


def rewind_proposal(run, onset_step: int, alert_step: int | None = None, *, margin: int = REWIND_MARGIN) -> dict | None:
    """The rewind for an incident (the PaLM practice): the latest checkpoint at least `margin` steps before the onset.

    Returns None when no checkpoint qualifies. Otherwise:
      checkpoint_step: the checkpoint to restart from;
      newest_step: the run's newest step; steps_redone: newest_step - checkpoint_step;
      alert_checkpoint_step: the last checkpoint at or before the alert (alert_step, default the onset), or None;
      alert_checkpoint_steps_redone: what rewinding there would redo;
      fewer_steps_than_alert_checkpoint: alert_checkpoint_steps_redone - steps_redone (negative: the proposal
        redoes that many more steps, the price of restarting before the onset rather than inside it);
      alert_checkpoint_after_onset: whether that checkpoint was written after the onset (it holds the fault);
      skip_batches: {"from_step", "to_step", "count"}: the batches the job consumed from the checkpoint up to
        the alert, i.e. before and during the onset (PaLM skipped the ~200-500 batches seen before and during
        a spike); the job should skip the data of these steps when it replays them.
    """
    checkpoints = checkpoint_steps(run)
    newest = run.attempt_max_step if run.attempt_max_step is not None else run.max_step
    alert_step = onset_step if alert_step is None else alert_step
    qualifying = [s for s in checkpoints if s <= onset_step - margin]
    if not qualifying or newest is None:
        return None
    chosen = qualifying[-1]
    before_alert = [s for s in checkpoints if s <= alert_step]
    naive = before_alert[-1] if before_alert else None
    redone = newest - chosen
    naive_redone = newest - naive if naive is not None else None
    skip_to = max(onset_step, alert_step)
    return {
        "checkpoint_step": chosen,
        "onset_step": onset_step,
        "alert_step": alert_step,
        "margin": margin,
        "newest_step": newest,
        "steps_redone": redone,
        "alert_checkpoint_step": naive,
        "alert_checkpoint_steps_redone": naive_redone,
        "fewer_steps_than_alert_checkpoint": None if naive_redone is None else naive_redone - redone,
        "alert_checkpoint_after_onset": None if naive is None else naive >= onset_step,
        "skip_batches": {"from_step": chosen + 1, "to_step": skip_to, "count": max(0, skip_to - chosen)},
    }


# ---------------------------------------------------------------------------------------------------
# Step 1: identity


def flatten(value, prefix="") -> dict:
    """Nested config as dotted keys: {"optim": {"lr": 1}} -> {"optim.lr": 1}. Lists are values."""
    if isinstance(value, dict) and value:
        out = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if not prefix:
        return {} if value is None or value == {} else {"(config)": value}
    return {prefix: value}


def _same(a, b) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def config_diff(config, other) -> list[dict]:
    mine, theirs = flatten(config), flatten(other)
    rows = []
    for key in sorted(set(mine) | set(theirs)):
        if key not in theirs:
            rows.append({"key": key, "change": "added", "run": words(mine[key], True), "comparison": None})
        elif key not in mine:
            rows.append({"key": key, "change": "removed", "run": None, "comparison": words(theirs[key], True)})
        elif not _same(mine[key], theirs[key]):
            rows.append({"key": key, "change": "changed", "run": words(mine[key], True), "comparison": words(theirs[key], True)})
    return rows


def phase_words(span) -> str:
    """"steady", or "cosine tail (lr decay)" when the sender named the phase other than by its kind."""
    kind = str(span.kind).replace("_", " ")
    return span.phase if span.phase in (span.kind, kind) else f"{span.phase} ({kind})"


def change_words(value, field) -> str:
    if field == "budget":
        return budget_words(value)
    return words(value, True)


def identity(review, ctx: Context | None = None) -> dict:
    ctx = ctx or Context(review)
    run = ctx.run
    changes = list(run.identity_changes.order_by("id"))
    recent = [c for c in changes if ctx.since_at is None or c.changed_at > ctx.since_at]
    changed = {c.field for c in recent}
    span = ctx.phase_at(ctx.newest) if ctx.newest is not None else None
    restarts = len(ctx.attempts) - 1 if ctx.attempts else 0
    rows = [
        {"field": "run id", "value": run.run_id},
        {"field": "name", "value": run.name or None, "highlight": "name" in changed},
        {"field": "code rev", "value": run.code_rev or None, "highlight": "code_rev" in changed},
        {"field": "data snapshot", "value": run.data_snapshot or None, "highlight": "data_snapshot" in changed},
        {"field": "config", "value": words(run.config, True) if run.config else None, "highlight": "config" in changed},
        {"field": "budget", "value": budget_words(run.budget) if run.budget else None, "highlight": "budget" in changed},
        {"field": "tags", "value": words(run.tags, True) if run.tags else None, "highlight": "tags" in changed},
        {"field": "phase", "value": f"{phase_words(span)} since step {span.start:,}" if span else None},
        {"field": "attempt", "value": f"{run.attempt}" + (f" ({restarts} restart{'s' if restarts != 1 else ''})" if restarts else "")},
        {"field": "newest step", "value": ctx.newest},
    ]
    change_rows = [
        {"field": c.field.replace("_", " "), "old": change_words(c.old, c.field), "new": change_words(c.new, c.field), "step": c.step,
         "changed_at": c.changed_at.isoformat(), "highlight": c in recent}
        for c in changes
    ]
    comparison = ctx.comparison
    diff = config_diff(run.config, comparison.config) if comparison is not None else []
    reasons = []
    if recent:
        reasons.append(f"identity changed since the last review: {', '.join(sorted(changed))}"
                       f" (at step{'s' if len(recent) > 1 else ''} {', '.join(sorted({str(c.step) for c in recent}))})")
    if len(diff) > 1:
        reasons.append(f"compared after changing several variables at once: {len(diff)} config keys differ from "
                       f"{comparison.run_id} ({', '.join(r['key'] for r in diff[:5])}{', …' if len(diff) > 5 else ''})")
    if reasons:
        state, summary = StepState.ATTENTION, "; ".join(reasons).capitalize()
    elif comparison is None:
        state, summary = StepState.PASS, "No identity change since the last review; no comparison run (the project has no reference run)"
    elif diff:
        state, summary = StepState.PASS, f"One config key differs from {comparison.run_id}: {diff[0]['key']}"
    else:
        state, summary = StepState.PASS, f"No identity change since the last review; config as {comparison.run_id}'s"
    evidence = [{"label": "run page", "href": run_href(run)}]
    if comparison is not None:
        evidence.append({"label": f"comparison run {comparison.run_id}", "href": run_href(comparison)})
    findings = {
        "columns": [["field", "Field"], ["value", "Value"]],
        "rows": rows,
        "comparison": comparison.run_id if comparison is not None else None,
        "changed_since_last_review": sorted(changed),
        "config_keys_differing": len(diff),
        "sections": [
            section("identity_changes", "Identity changes",
                    [("field", "Field"), ("old", "Before"), ("new", "After"), ("step", "Step"), ("changed_at", "When")],
                    change_rows, "No identity change."),
            section("config_diff", f"Config against {comparison.run_id}" if comparison else "Config against a comparison run",
                    [("key", "Key"), ("change", "Change"), ("run", "This run"), ("comparison", "Comparison")],
                    diff, "No difference." if comparison else "No comparison run: the project has no reference run."),
        ],
    }
    return step_result(1, state, summary, findings, evidence)


# ---------------------------------------------------------------------------------------------------
# Step 2: hard invariants


def _nonfinite(ctx) -> list[dict]:
    """Per series: non-finite points since the last review (any attempt), with the first step."""
    blocks = Block.objects.filter(series__run=ctx.run, nonfinite_count__gt=0)
    if ctx.since_step is not None:
        blocks = blocks.filter(last_step__gt=ctx.since_step)
    per_series = list(blocks.values("series_id").annotate(first=Min("first_step"), n=Sum("nonfinite_count"))
                      .order_by("first")[:MAX_ROWS * 4])
    if not per_series:
        return []
    by_id = {s.pk: s for s in ctx.series}
    wanted = Q()
    for row in per_series:
        wanted |= Q(series_id=row["series_id"], first_step=row["first"])
    first_blocks = {}
    for series_id, data in blocks.filter(wanted).order_by("attempt").values_list("series_id", "data"):
        steps, values, _ = unpack(data)
        bad = ~np.isfinite(values)
        if ctx.since_step is not None:
            bad &= steps > ctx.since_step
        if bad.any():
            step = int(steps[bad][0])
            first_blocks[series_id] = min(step, first_blocks.get(series_id, step))
    rows = []
    for row in per_series:
        series = by_id.get(row["series_id"])
        if series is None:
            continue
        first = first_blocks.get(row["series_id"], row["first"])
        rows.append({"layer": series.layer, "metric": series.metric, "component": series.component or "(run)",
                     "first_step": first, "count": row["n"],
                     "href": run_href(ctx.run, series.metric, series.component, max(0, first - 50), first + 50)})
    return sorted(rows, key=lambda r: (r["first_step"], r["layer"], r["component"], r["metric"]))


def _gaps(ctx, series) -> list[dict]:
    """Missing steps of the main series in the current attempt since the last review."""
    start = ctx.attempt_start
    if ctx.since_step is not None:
        start = max(start, ctx.since_step + 1)
    end = ctx.newest
    if end is None or end < start:
        return []
    if end - start <= GAP_SCAN_MAX_STEPS:
        steps, _, attempts = read_points(series, start=start, end=end)
        steps = steps[attempts == ctx.run.attempt]
        if len(steps) < 3:
            return []
        d = np.diff(steps)
        cadence = max(1, int(np.median(d)))
        where = np.flatnonzero(d > cadence)
        return [{"from_step": int(steps[i]) + 1, "to_step": int(steps[i + 1]) - 1,
                 "missing": int(round(d[i] / cadence)) - 1, "cadence": cadence} for i in where
                if round(d[i] / cadence) - 1 >= 1]
    buckets = np.array(sorted(Rollup.objects.filter(series=series, bucket__gte=start // ROLLUP_WIDTH,
                                                    bucket__lte=end // ROLLUP_WIDTH).values_list("bucket", flat=True)))
    if len(buckets) < 2:
        return []
    d = np.diff(buckets)
    return [{"from_step": int(buckets[i] + 1) * ROLLUP_WIDTH, "to_step": int(buckets[i + 1]) * ROLLUP_WIDTH - 1,
             "missing": int(d[i] - 1) * ROLLUP_WIDTH, "cadence": None} for i in np.flatnonzero(d > 1)]


def _lagging(ctx) -> list[dict]:
    groups = {}
    for s in ctx.series:
        if s.component:
            groups.setdefault(s.metric, []).append(s)
    rows = []
    for metric, members in groups.items():
        if len(members) < 2:
            continue
        newest_step = max(s.max_step for s in members)
        times = [s.last_time for s in members if s.last_time is not None]
        newest_time = max(times) if times else None
        for s in members:
            lag_steps = newest_step - s.max_step
            lag_seconds = newest_time - s.last_time if newest_time is not None and s.last_time is not None else None
            if lag_steps > SYNC_LAG_STEPS or (lag_seconds is not None and lag_seconds > SYNC_LAG_SECONDS):
                rows.append({"metric": metric, "component": s.component, "last_step": s.max_step, "newest_step": newest_step,
                             "lag_steps": lag_steps, "lag_seconds": lag_seconds,
                             "href": run_href(ctx.run, metric, s.component, max(0, s.max_step - 100), newest_step)})
    return sorted(rows, key=lambda r: (-r["lag_steps"], r["metric"], r["component"]))


def _data_contracts(ctx) -> list[dict]:
    judged = [s for s in ctx.series if s.metric in DATA_THRESHOLDS]
    rows = []
    if judged:
        since_bucket = (ctx.since_step + 1) // ROLLUP_WIDTH if ctx.since_step is not None else 0
        over = Q(pk__in=[])
        for s in judged:
            direction, limit = DATA_THRESHOLDS[s.metric]
            over |= Q(series_id=s.pk, **({"max_value__gt": limit} if direction == "above" else {"min_value__lt": limit}))
        found = (Rollup.objects.filter(bucket__gte=since_bucket).filter(over).values("series_id")
                 .annotate(first=Min("bucket"), worst_max=Max("max_value"), worst_min=Min("min_value")))
        by_id = {s.pk: s for s in judged}
        for row in list(found)[:MAX_ROWS]:
            s = by_id[row["series_id"]]
            direction, limit = DATA_THRESHOLDS[s.metric]
            lo = row["first"] * ROLLUP_WIDTH
            if ctx.since_step is not None:
                lo = max(lo, ctx.since_step + 1)
            steps, values, _ = read_points(s, start=lo, end=row["first"] * ROLLUP_WIDTH + ROLLUP_WIDTH - 1)
            beyond = values > limit if direction == "above" else values < limit
            first = int(steps[beyond][0]) if beyond.any() else None
            worst = row["worst_max"] if direction == "above" else row["worst_min"]
            rows.append({"metric": s.metric, "component": s.component or "(run)", "first_step": first,
                         "worst": worst, "threshold": f"{direction} {fmt(limit)}", "alert": None,
                         "href": run_href(ctx.run, s.metric, s.component, first, ctx.newest)})
    for alert in ctx.alerts:
        if alert.metric in DATA_CONTRACT_METRICS and ctx.is_new(alert):
            rows.append({"metric": alert.metric, "component": alert.component or "(run)", "first_step": alert.first_step,
                         "worst": alert.magnitude, "threshold": f"{alert.rule.name}: {alert.magnitude_unit}",
                         "alert": alert.pk, "href": alert_href(alert, ctx.run)})
    return sorted(rows, key=lambda r: (r["first_step"] is None, r["first_step"] or 0, r["metric"]))


def _checkpoints(ctx) -> dict:
    steps = checkpoint_steps(ctx.run, ctx.attempts)
    newest = ctx.newest
    result = {"checkpoints": len(steps), "last_checkpoint_step": steps[-1] if steps else None, "usual_interval": None,
              "steps_since": None, "missed": False, "checkpoint_time_alerts": []}
    if steps and newest is not None:
        result["steps_since"] = newest - steps[-1]
    if len(steps) >= 2:
        usual = float(np.median(np.diff(steps)))
        result["usual_interval"] = usual
        result["missed"] = result["steps_since"] is not None and result["steps_since"] > CHECKPOINT_MISSED_FACTOR * usual
    result["checkpoint_time_alerts"] = [
        {"component": a.component or "(run)", "first_step": a.first_step, "magnitude": a.magnitude,
         "unit": a.magnitude_unit, "rule": a.rule.name, "state": a.state, "href": alert_href(a, ctx.run)}
        for a in ctx.alerts if a.metric == "checkpoint_time" and ctx.is_new(a)
    ]
    return result


def invariants(review, ctx: Context | None = None) -> dict:
    ctx = ctx or Context(review)
    run = ctx.run
    since_words = f"since step {ctx.since_step:,}" if ctx.since_step is not None else "over the whole run"
    if ctx.newest is None or not ctx.series:
        return step_result(2, StepState.NO_DATA, "No points stored yet", {"columns": [], "rows": [], "sections": []}, [])
    evidence = []
    nonfinite = _nonfinite(ctx)
    absences = [a for a in ctx.alerts if a.rule.kind == RuleKind.ABSENCE and ctx.is_new(a)]
    open_absence = [a for a in absences if a.state != AlertState.RESOLVED]
    main = ctx.by_key.get((ctx.headline, "")) if ctx.headline else None
    gaps = _gaps(ctx, main) if main is not None else []
    stalled = run.status == RunStatus.STALLED or bool(open_absence)
    lagging = _lagging(ctx)
    data = _data_contracts(ctx)
    ckpt = _checkpoints(ctx)

    checks = []
    if nonfinite:
        first = nonfinite[0]
        where = f"{first['metric']} on {first['component']}" if first["component"] != "(run)" else first["metric"]
        checks.append({"check": "non-finite values", "state": StepState.FAIL,
                       "detail": f"{len(nonfinite)} series with non-finite values {since_words}; first {where} at step {first['first_step']:,}"})
    else:
        checks.append({"check": "non-finite values", "state": StepState.PASS, "detail": f"none {since_words}"})
    missing_total = sum(g["missing"] for g in gaps)
    if stalled:
        detail = "run stalled" + (f": {open_absence[0].rule.name} open since step {open_absence[0].first_step:,}" if open_absence else " (no new steps)")
        checks.append({"check": "missing steps and stalls", "state": StepState.FAIL, "detail": detail})
    elif gaps or absences:
        parts = []
        if gaps:
            parts.append(f"{len(gaps)} gap{'s' if len(gaps) > 1 else ''} in {ctx.headline} ({missing_total:,} points missing, first after step {gaps[0]['from_step'] - 1:,})")
        if absences:
            parts.append(f"{len(absences)} absence alert{'s' if len(absences) > 1 else ''}")
        checks.append({"check": "missing steps and stalls", "state": StepState.ATTENTION, "detail": "; ".join(parts)})
    elif main is None:
        checks.append({"check": "missing steps and stalls", "state": StepState.NO_DATA, "detail": "no loss series to check for gaps"})
    else:
        checks.append({"check": "missing steps and stalls", "state": StepState.PASS, "detail": f"no gap in {ctx.headline} in the current attempt {since_words}"})
    if lagging:
        worst = lagging[0]
        checks.append({"check": "synchronisation", "state": StepState.ATTENTION,
                       "detail": f"{len(lagging)} component{'s' if len(lagging) > 1 else ''} lagging; {worst['component']} ({worst['metric']}) "
                                 f"last at step {worst['last_step']:,}, {worst['lag_steps']:,} steps behind"})
    else:
        checks.append({"check": "synchronisation", "state": StepState.PASS,
                       "detail": f"no component more than {SYNC_LAG_STEPS} steps or {SYNC_LAG_SECONDS:.0f} s behind"})
    if data:
        first = data[0]
        checks.append({"check": "data contracts", "state": StepState.ATTENTION,
                       "detail": f"{len(data)} finding{'s' if len(data) > 1 else ''}; {first['metric']} {first['threshold']}"
                                 + (f" from step {first['first_step']:,}" if first["first_step"] is not None else "")})
    elif not any(s.metric in DATA_CONTRACT_METRICS for s in ctx.series):
        checks.append({"check": "data contracts", "state": StepState.NO_DATA, "detail": "no data-layer contract metrics sent"})
    else:
        checks.append({"check": "data contracts", "state": StepState.PASS, "detail": "within thresholds and bands"})
    if ckpt["missed"] or ckpt["checkpoint_time_alerts"]:
        parts = []
        if ckpt["missed"]:
            parts.append(f"missed checkpoint: {ckpt['steps_since']:,} steps since the last (step {ckpt['last_checkpoint_step']:,}), "
                         f"usually every {fmt(ckpt['usual_interval'])}")
        if ckpt["checkpoint_time_alerts"]:
            parts.append(f"checkpoint_time out of band ({len(ckpt['checkpoint_time_alerts'])} alert(s))")
        checks.append({"check": "checkpoint integrity", "state": StepState.ATTENTION, "detail": "; ".join(parts)})
    elif ckpt["last_checkpoint_step"] is None:
        checks.append({"check": "checkpoint integrity", "state": StepState.NO_DATA, "detail": "no checkpoint phase sent: work at risk unknown"})
    else:
        checks.append({"check": "checkpoint integrity", "state": StepState.PASS,
                       "detail": f"last checkpoint at step {ckpt['last_checkpoint_step']:,}; {ckpt['steps_since']:,} steps at risk"})

    for row in nonfinite[:10]:
        evidence.append({"label": f"{row['metric']} on {row['component']} non-finite from step {row['first_step']:,}", "href": row["href"]})
    for alert in absences[:10]:
        evidence.append({"label": f"{alert.rule.name} from step {alert.first_step:,}", "href": alert_href(alert, run)})
    for gap in gaps[:5]:
        evidence.append({"label": f"{ctx.headline} gap at steps {gap['from_step']:,}-{gap['to_step']:,}",
                         "href": run_href(run, ctx.headline, None, max(0, gap["from_step"] - 100), gap["to_step"] + 100)})
    for row in lagging[:5]:
        evidence.append({"label": f"{row['metric']} on {row['component']} stops at step {row['last_step']:,}", "href": row["href"]})
    for row in data[:5]:
        evidence.append({"label": f"{row['metric']} on {row['component']}", "href": row["href"]})
    for row in ckpt["checkpoint_time_alerts"][:5]:
        evidence.append({"label": f"checkpoint_time {row['rule']} at step {row['first_step']:,}", "href": row["href"]})

    states = {c["state"] for c in checks}
    state = StepState.FAIL if StepState.FAIL in states else StepState.ATTENTION if StepState.ATTENTION in states else StepState.PASS
    flagged = [c for c in checks if c["state"] in (StepState.FAIL, StepState.ATTENTION)]
    summary = "; ".join(f"{c['check']}: {c['detail']}" for c in flagged) if flagged else f"All clear {since_words}"
    findings = {
        "columns": [["check", "Check"], ["state", "State"], ["detail", "Finding"]],
        "rows": checks,
        "since_step": ctx.since_step,
        "stalled": stalled,
        "checkpoint": {k: v for k, v in ckpt.items() if k != "checkpoint_time_alerts"},
        "work_at_risk_steps": ckpt["steps_since"],
        "sections": [
            section("nonfinite", "Non-finite values", [("layer", "Layer"), ("metric", "Metric"), ("component", "Component"),
                    ("first_step", "First step"), ("count", "Points")], nonfinite, f"No non-finite value {since_words}."),
            section("gaps", f"Gaps in {ctx.headline or 'the main series'} (current attempt)",
                    [("from_step", "From step"), ("to_step", "To step"), ("missing", "Points missing")], gaps, "No gap."),
            section("absence", "Absence alerts",
                    [("rule", "Rule"), ("metric", "Metric"), ("first_step", "From step"), ("last_step", "To step"),
                     ("magnitude", "Magnitude"), ("unit", "Unit"), ("state", "State")],
                    [{"rule": a.rule.name, "metric": a.metric, "first_step": a.first_step, "last_step": a.last_step,
                      "magnitude": a.magnitude, "unit": a.magnitude_unit, "state": a.state, "alert": a.pk,
                      "href": alert_href(a, run)} for a in absences], "No absence alert."),
            section("sync", "Components lagging", [("metric", "Metric"), ("component", "Component"), ("last_step", "Last step"),
                    ("lag_steps", "Steps behind"), ("lag_seconds", "Seconds behind")], lagging, "All components keep up."),
            section("data", "Data contracts", [("metric", "Metric"), ("component", "Component"), ("first_step", "First step"),
                    ("worst", "Worst"), ("threshold", "Threshold or rule")], data, "No data-contract finding."),
            section("checkpoint_time", "checkpoint_time out of band", [("component", "Component"), ("first_step", "From step"),
                    ("magnitude", "Magnitude"), ("unit", "Unit"), ("state", "State")], ckpt["checkpoint_time_alerts"],
                    "No checkpoint_time alert."),
        ],
    }
    return step_result(2, state, summary[:1].upper() + summary[1:], findings, evidence)


# ---------------------------------------------------------------------------------------------------
# Step 3: expectation


def direction_of(metric: str) -> str | None:
    """"lower" or "higher" is better, by the metric's last name part; None when the name does not say."""
    name = metric.rsplit("/", 1)[-1].lower()
    words = set(name.replace("-", "_").replace(".", "_").split("_"))
    if any(w in words for w in LOWER_IS_BETTER) or any(name.endswith(w) for w in ("loss", "error", "perplexity")):
        return "lower"
    if any(w in words for w in HIGHER_IS_BETTER) or any(name.endswith(w) for w in ("accuracy", "score")):
        return "higher"
    return None


def _window_mean(series, step) -> tuple[float | None, int | None]:
    """Mean of the finite values of the COMPARE_WINDOW_STEPS steps up to `step`, and the last step in it."""
    steps, values, _ = read_points(series, start=max(0, step - COMPARE_WINDOW_STEPS + 1), end=step)
    finite = np.isfinite(values)
    if not finite.any():
        return (math.nan if len(values) else None), (int(steps[-1]) if len(steps) else None)
    return float(values[finite].mean()), int(steps[-1])


def expectation(review, ctx: Context | None = None) -> dict:
    ctx = ctx or Context(review)
    run = ctx.run
    band_alerts = [a for a in ctx.alerts if a.rule.kind in EXPECTATION_RULE_KINDS and ctx.is_new(a)]
    band_alerts.sort(key=lambda a: (a.first_step, a.id))
    band_rows = [{"component": a.component or "(run)", "metric": a.metric or a.condition, "rule": a.rule.name,
                  "first_step": a.first_step, "last_step": a.last_step, "magnitude": a.magnitude, "unit": a.magnitude_unit,
                  "state": a.state, "alert": a.pk, "href": alert_href(a, run)} for a in band_alerts]
    if review.comparison_id:
        references = [review.comparison]
    else:
        references = list(Run.objects.filter(project_id=run.project_id, reference=True).exclude(pk=run.pk)
                          .order_by(F("last_seen_at").desc(nulls_last=True), "-id")[:REFERENCE_LIMIT])
    metrics = [(m, c) for m, c in ((ctx.headline, ""), (ctx.chosen, ctx.chosen_component)) if m]
    metrics = list(dict.fromkeys(metrics))
    ref_series = {}
    if references and metrics:
        wanted = Q(pk__in=[])
        for m, c in metrics:
            wanted |= Q(metric=m, component=c)
        for s in Series.objects.filter(run__in=references).filter(wanted):
            ref_series[(s.run_id, s.metric, s.component)] = s
    compare_rows, worse = [], []
    for metric, component in metrics:
        mine = ctx.by_key.get((metric, component))
        if mine is None or mine.max_step < 0:
            continue
        refs = [(r, ref_series.get((r.pk, metric, component))) for r in references]
        refs = [(r, s) for r, s in refs if s is not None and s.max_step >= 0]
        if not refs:
            continue
        common = min([mine.max_step] + [s.max_step for _, s in refs])
        checkpoints = sorted({max(0, int(round(common * share))) for share in COMPARE_POINTS})
        direction = direction_of(metric)
        for step in checkpoints:
            value, at = _window_mean(mine, step)
            ref_values = [v for v, _ in (_window_mean(s, step) for _, s in refs) if v is not None and math.isfinite(v)]
            if value is None:
                continue
            ref_lo = min(ref_values) if ref_values else None
            ref_hi = max(ref_values) if ref_values else None
            ref_mid = float(np.mean(ref_values)) if ref_values else None
            ratio = value / ref_mid if ref_mid not in (None, 0.0) and math.isfinite(value) else None
            outside = ref_values and math.isfinite(value) and not (ref_lo <= value <= ref_hi)
            row = {"metric": metric if not component else f"{metric} on {component}", "step": step, "run": value,
                   "reference": ref_mid, "reference_min": ref_lo, "reference_max": ref_hi, "ratio": ratio,
                   "references": len(ref_values), "outside": bool(outside),
                   "href": run_href(run, metric, component, max(0, step - COMPARE_WINDOW_STEPS + 1), step)}
            compare_rows.append(row)
        last = compare_rows[-1] if compare_rows and compare_rows[-1]["metric"].split(" on ")[0] == metric else None
        if last and last["ratio"] is not None and direction:
            bad = last["ratio"] > 1 + EXPECTATION_WORSE_SHARE if direction == "lower" else last["ratio"] < 1 - EXPECTATION_WORSE_SHARE
            if bad:
                worse.append(last)
        elif last and last["run"] is not None and not math.isfinite(last["run"]):
            worse.append(last)
    reasons = []
    if band_rows:
        first = band_rows[0]
        reasons.append(f"{len(band_rows)} component{'s' if len(band_rows) > 1 else ''} outside their band; first "
                       f"{first['metric']} on {first['component']} from step {first['first_step']:,} "
                       f"({fmt(first['magnitude'])} {first['unit']})")
    for row in worse:
        reasons.append(f"{row['metric']} at step {row['step']:,} is {fmt(row['run'])} against the reference's "
                       f"{fmt(row['reference'])} (ratio {fmt(row['ratio'])})")
    no_reference = not compare_rows
    if reasons:
        state, summary = StepState.ATTENTION, "; ".join(reasons)
    elif no_reference:
        state = StepState.NO_DATA
        summary = ("No reference run to compare with" if not references else
                   f"The reference run{'s' if len(references) > 1 else ''} share{'s' if len(references) == 1 else ''} no compared metric with this run") + "; no band alert"
    else:
        last = compare_rows[-1]
        summary = (f"Within band; {last['metric']} at step {last['step']:,} is {fmt(last['run'])} against the reference's "
                   f"{fmt(last['reference'])} (ratio {fmt(last['ratio'])})")
        state = StepState.PASS
    evidence = [{"label": f"{r['rule']} on {r['component']} from step {r['first_step']:,}", "href": r["href"]} for r in band_rows[:15]]
    evidence += [{"label": f"{r['metric']} at step {r['step']:,}", "href": r["href"]} for r in compare_rows if r["step"] == max(x["step"] for x in compare_rows)]
    evidence += [{"label": f"reference run {r.run_id}", "href": run_href(r)} for r in references]
    findings = {
        "columns": [["component", "Component"], ["metric", "Metric"], ["rule", "Rule"], ["first_step", "Left band at"],
                    ["last_step", "Last step"], ["magnitude", "Magnitude"], ["unit", "Unit"], ["state", "State"]],
        "rows": band_rows,
        "references": [r.run_id for r in references],
        "sections": [
            section("reference", "Beside the reference run" + ("s" if len(references) > 1 else ""),
                    [("metric", "Metric"), ("step", "Step"), ("run", "This run"), ("reference", "Reference"),
                     ("reference_min", "Reference min"), ("reference_max", "Reference max"), ("ratio", "Ratio")],
                    compare_rows, "No reference run to compare with." if not references else "No metric in common with the reference runs."),
        ],
    }
    return step_result(3, state, summary, findings, evidence)


# ---------------------------------------------------------------------------------------------------
# Step 4: slices


def _slice_parts(metric):
    parts = metric.split("/")
    if len(parts) == 3 and parts[0] in SLICE_PREFIXES and all(parts):
        return parts[0], parts[1], parts[2]
    return None


def _better(direction, new, old) -> int:
    """+1 improved, -1 worsened, 0 unchanged (within SLICE_CHANGE_TOLERANCE of the earlier value)."""
    if direction is None or new is None or old is None or not (math.isfinite(new) and math.isfinite(old)):
        return 0
    if abs(new - old) <= SLICE_CHANGE_TOLERANCE * max(abs(old), 1e-12):
        return 0
    return (1 if new < old else -1) if direction == "lower" else (1 if new > old else -1)


def _worse_factor(direction, value, aggregate):
    """How many times worse the slice is than the aggregate (>1 = worse); None when not comparable.

    Lower-is-better: slice / aggregate. Higher-is-better scores within [0, 1] (accuracy, F1): on the
    shortfall, (1 - slice) / (1 - aggregate), so 65% against 90% accuracy is 3.5x the error rate;
    other higher-is-better values: aggregate / slice.
    """
    if direction is None or value is None or aggregate is None or not (math.isfinite(value) and math.isfinite(aggregate)):
        return None
    if direction == "lower":
        return value / aggregate if aggregate > 0 else None
    if 0 <= value <= 1 and 0 <= aggregate < 1:
        return (1 - value) / (1 - aggregate)
    return aggregate / value if value > 0 else None


def slices(review, ctx: Context | None = None) -> dict:
    ctx = ctx or Context(review)
    run = ctx.run
    sliced = {}
    aggregates = {}
    for s in ctx.series:
        if s.component or s.max_step < 0:
            continue
        parts = _slice_parts(s.metric)
        if parts and parts[1] not in AGGREGATE_SLICES:
            sliced[s.metric] = (parts, s)
        elif parts:
            aggregates.setdefault((parts[0], parts[2]), s)  # eval/all/acc stands in for eval/acc
        elif s.metric.count("/") == 1 and s.metric.split("/")[0] in SLICE_PREFIXES:
            prefix, name = s.metric.split("/")
            aggregates[(prefix, name)] = s  # eval/acc itself wins over a slice named all
    if not sliced:
        return step_result(4, StepState.NO_DATA, "No sliced evaluation metrics (eval/<slice>/<metric> or val/<slice>/<metric>)",
                           {"columns": [], "rows": [], "sections": []}, [])

    # Every sliced series and its aggregate in one read (evaluations are sparse: whole histories are small).
    left_out = max(0, len(sliced) - MAX_SLICE_SERIES)
    sliced = dict(sorted(sliced.items())[:MAX_SLICE_SERIES])
    wanted = {s.pk: s for _, s in sliced.values()}
    wanted.update({s.pk: s for key, s in aggregates.items() if key in {(p[0], p[2]) for p, _ in sliced.values()}})
    histories = read_points_of_many(list(wanted.values()))

    def history(series):
        steps, values, _ = histories[series.pk]
        return steps, values

    def baseline_and_now(steps, values):
        finite = np.isfinite(values)
        if not len(steps):
            return None
        now = (int(steps[-1]), float(values[-1]))
        if ctx.since_step is not None and (steps <= ctx.since_step).any():
            i = int(np.flatnonzero(steps <= ctx.since_step)[-1])
        else:
            i = 0
        base = (int(steps[i]), float(values[i]))
        return base, now, bool(finite.all())

    rows = []
    for metric, ((prefix, slice_name, name), s) in sorted(sliced.items()):
        direction = direction_of(name)
        points = baseline_and_now(*history(s))
        if points is None:
            continue
        (base_step, base), (now_step, now), _ = points
        agg_series = aggregates.get((prefix, name))
        agg_base = agg_now = None
        if agg_series is not None:
            a_steps, a_values = history(agg_series)

            def at(step):
                idx = np.flatnonzero(a_steps <= step)
                return float(a_values[idx[-1]]) if len(idx) else None

            agg_base, agg_now = at(base_step), at(now_step)
            if agg_base is None and len(a_steps):
                agg_base = float(a_values[0])
        change = _better(direction, now, base)
        agg_change = _better(direction, agg_now, agg_base)
        factor = _worse_factor(direction, now, agg_now)
        flags = []
        if change < 0 and agg_change > 0:
            flags.append("worsened while the aggregate improved")
        if factor is not None and factor > SLICE_WORSE_FACTOR:
            flags.append(f"{fmt(factor)}x worse than the aggregate")
        if not math.isfinite(now):
            flags.append("non-finite")
        words = {1: "improved", -1: "worsened", 0: "unchanged" if direction else "direction unknown"}
        rows.append({"metric": name, "slice": slice_name, "series": metric, "from_step": base_step, "from": base,
                     "step": now_step, "value": now, "change": words[change], "aggregate_from": agg_base, "aggregate": agg_now,
                     "aggregate_change": words[agg_change] if agg_series is not None else "no aggregate",
                     "worse_factor": factor, "direction": direction, "flag": "; ".join(flags) or None,
                     "highlight": bool(flags), "href": run_href(run, metric, None, base_step, now_step)})
    flagged = [r for r in rows if r["flag"]]
    if flagged:
        state = StepState.ATTENTION
        summary = "; ".join(f"{r['slice']} {r['metric']} {r['flag']} ({fmt(r['from'])} at step {r['from_step']:,} to "
                            f"{fmt(r['value'])} at step {r['step']:,}; aggregate {fmt(r['aggregate_from'])} to {fmt(r['aggregate'])})"
                            for r in flagged[:3]) + ("; …" if len(flagged) > 3 else "")
    else:
        state = StepState.PASS
        summary = f"{len(rows)} slice metric{'s' if len(rows) != 1 else ''}: none worsened against the aggregate or worse than {SLICE_WORSE_FACTOR}x it"
    evidence = [{"label": f"{r['series']} from step {r['from_step']:,} to {r['step']:,}", "href": r["href"]} for r in (flagged or rows)[:15]]
    findings = {
        "columns": [["metric", "Metric"], ["slice", "Slice"], ["from_step", "From step"], ["from", "Was"], ["step", "Step"],
                    ["value", "Now"], ["change", "Change"], ["aggregate_from", "Aggregate was"], ["aggregate", "Aggregate now"],
                    ["aggregate_change", "Aggregate change"], ["worse_factor", "× worse than aggregate"], ["flag", "Finding"]],
        "rows": sorted(rows, key=lambda r: (not r["flag"], r["metric"], r["slice"])),
        "worse_factor": SLICE_WORSE_FACTOR,
        "left_out": left_out,
        "window": "since the last review" if ctx.since_step is not None else "first to last evaluation",
        "sections": [],
    }
    return step_result(4, state, summary, findings, evidence)


# ---------------------------------------------------------------------------------------------------
# Step 5: remaining value


def _regime_start(ctx) -> tuple[int, str | None]:
    """Where the current regime of the curve began (the fit's first step), and why: the current attempt's
    start or the latest phase that changes the curve's shape; the end of a warmup starts the regime after it."""
    start, why = ctx.attempt_start, ("the current attempt" if ctx.attempt_start else None)
    newest = ctx.newest or 0
    previous_kind = None
    for span in ctx.spans:
        if span.start > newest:
            break
        breaks = span.kind in REGIME_BREAKS or (previous_kind == "warmup" and span.kind != "warmup")
        if span.kind in REGIME_KINDS:
            previous_kind = span.kind
        if breaks and span.start > start:
            start, why = span.start, f"the {span.phase} phase"
    budget = (ctx.run.budget or {}).get("steps") if isinstance(ctx.run.budget, dict) else None
    if not any(s.kind == "warmup" for s in ctx.spans) and isinstance(budget, (int, float)) and budget > 0:
        implicit = int(math.ceil(IMPLICIT_WARMUP_SHARE * budget))
        if implicit > start:
            start, why = implicit, "the end of the implicit warmup"
    return start, why


def _binned(steps, values, bins):
    finite = np.isfinite(values)
    steps, values = steps[finite], values[finite]
    if len(steps) == 0:
        return steps.astype(float), values
    # Edges evenly spaced in log(step): narrow bins where a saturating curve bends most, so a bin's mean
    # is close to the curve at the bin's mean step.
    edges = np.geomspace(steps[0] + 1, steps[-1] + 2, min(bins, len(steps)) + 1) - 1
    index = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, len(edges) - 2)
    counts = np.bincount(index, minlength=len(edges) - 1)
    keep = counts > 0
    # x counts steps from one: step 0 is the first step taken.
    x = np.bincount(index, weights=steps + 1.0, minlength=len(edges) - 1)[keep] / counts[keep]
    y = np.bincount(index, weights=values, minlength=len(edges) - 1)[keep] / counts[keep]
    return x, y


def fit_saturating(x, y, x_end, *, seed=0) -> dict:
    """Least squares of y = a + b * (x / x_max)^-c over the exponent grid (linear in a, b for each c).

    Returns {"ok": bool, "why": words when not ok, "r2", "a", "b", "c", "value", "low", "high"}: the fitted
    trend at x_end with a residual-bootstrap interval (FIT_BOOTSTRAP resamples, FIT_INTERVAL percentiles). Not ok
    when the newest measured bin lies outside the fit's own band there (FIT_AGREEMENT_INTERVAL).
    """
    n = len(x)
    if n < 10:
        return {"ok": False, "why": f"too few points to fit ({n} bins)"}
    scale = float(x.max())
    xs = x / scale
    X = xs[None, :] ** -FIT_EXPONENTS[:, None]
    X_mean = X.mean(axis=1)
    Xc = X - X_mean[:, None]
    Sxx = (Xc ** 2).sum(axis=1)
    usable = Sxx > 1e-12
    if not usable.any():
        return {"ok": False, "why": "the history is too short to fit"}

    def closed_form(Xr, Y):
        """Per row of Y and per candidate design row of Xr (rows, candidates, n): a, b and the squared error."""
        Xm = Xr.mean(axis=-1)
        Xcr = Xr - Xm[..., None]
        Sxx_r = (Xcr ** 2).sum(axis=-1)
        Yc = Y - Y.mean(axis=1, keepdims=True)
        Sxy = np.einsum("rkn,rn->rk", Xcr, Yc) if Xr.ndim == 3 else Yc @ Xcr.T
        Syy = (Yc ** 2).sum(axis=1)
        ok = Sxx_r > 1e-12
        sse = np.where(ok, Syy[:, None] - Sxy ** 2 / np.where(ok, Sxx_r, 1.0), np.inf)
        return Sxy, Sxx_r, Xm, sse, Syy

    def solve(Y):
        # The coarse grid finds each row's neighbourhood of c; a fine grid between its neighbours refines it,
        # so the grid's spacing is not what the projection's error is made of.
        _, _, _, sse, _ = closed_form(X, Y)
        k = sse.argmin(axis=1)
        lo = FIT_EXPONENTS[np.maximum(k - 1, 0)]
        hi = FIT_EXPONENTS[np.minimum(k + 1, len(FIT_EXPONENTS) - 1)]
        fine = lo[:, None] + (hi - lo)[:, None] * np.linspace(0, 1, 41)[None, :]
        Xf = xs[None, None, :] ** -fine[:, :, None]
        Sxy, Sxx_f, Xm, sse, Syy = closed_form(Xf, Y)
        j = sse.argmin(axis=1)
        rows = np.arange(len(Y))
        b = Sxy[rows, j] / Sxx_f[rows, j]
        a = Y.mean(axis=1) - b * Xm[rows, j]
        return a, b, fine[rows, j], sse[rows, j], Syy

    a, b, c, sse, syy = solve(y[None, :])
    a, b, c, sse, syy = float(a[0]), float(b[0]), float(c[0]), float(sse[0]), float(syy[0])
    if syy <= 0:
        return {"ok": False, "why": "the metric is flat (no change to fit)"}
    r2 = 1 - sse / syy
    fitted = a + b * xs ** -c
    predict = a + b * (x_end / scale) ** -c
    result = {"r2": r2, "a": a, "b": b, "c": c}
    if not (math.isfinite(r2) and math.isfinite(predict)):
        return {**result, "ok": False, "why": "the fit did not converge"}
    if r2 < FIT_MIN_R2:
        return {**result, "ok": False, "why": f"the fit is poor (R² {r2:.2f} < {FIT_MIN_R2})"}
    rng = np.random.default_rng(seed)
    residuals = y - fitted
    Y = fitted[None, :] + residuals[rng.integers(0, n, size=(FIT_BOOTSTRAP, n))]
    ba, bb, bc, _, _ = solve(Y)
    projections = ba + bb * (x_end / scale) ** -bc
    low, high = np.percentile(projections, FIT_INTERVAL)
    # The fit must agree with the data it was fitted on: the newest measured bin within the fit's own band there
    # (the trend's bootstrap spread plus a bin's scatter, wide percentiles so a good fit is not turned away by chance).
    trend_last = ba + bb * (x[-1] / scale) ** -bc
    band = trend_last + residuals[rng.integers(0, n, size=len(trend_last))]
    last_low, last_high = np.percentile(band, FIT_AGREEMENT_INTERVAL)
    if not last_low <= y[-1] <= last_high:
        return {**result, "ok": False,
                "why": (f"the fit disagrees with the data it was fitted on (measured {fmt(y[-1])} at step {fmt(x[-1] - 1)}, "
                        f"outside its own interval {fmt(last_low)}–{fmt(last_high)} there)")}
    return {**result, "ok": True, "value": predict, "low": float(min(low, predict)), "high": float(max(high, predict))}


def _target(ctx, metric):
    """A target for `metric`: review.trigger_detail["target"], else the run's config["target"], each a number
    (for the chosen metric) or {"metric": ..., "value": ...}. The contract's budget has no target field."""
    detail = ctx.review.trigger_detail if isinstance(ctx.review.trigger_detail, dict) else {}
    config = ctx.run.config if isinstance(ctx.run.config, dict) else {}
    for source in (detail.get("target"), config.get("target")):
        if isinstance(source, (int, float)) and not isinstance(source, bool):
            return float(source)
        if isinstance(source, dict) and isinstance(source.get("value"), (int, float)) and source.get("metric", metric) == metric:
            return float(source["value"])
    return None


def _gpu_count(run):
    """The job's GPU count from its config (the contract's budget names none)."""
    if isinstance(run.config, dict):
        for key in GPU_COUNT_KEYS:
            value = run.config.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return float(value)
    return None


def remaining_value(review, ctx: Context | None = None) -> dict:
    ctx = ctx or Context(review)
    run = ctx.run
    metric, component = ctx.chosen, ctx.chosen_component if ctx.chosen != ctx.headline else ""
    series = ctx.by_key.get((metric, component)) if metric else None
    if series is None or ctx.newest is None:
        return step_result(5, StepState.NO_DATA, "No points of the chosen metric: no remaining value to estimate",
                           {"columns": [], "rows": [], "sections": [], "projection": None}, [])
    budget = run.budget if isinstance(run.budget, dict) else {}
    budget_steps = budget.get("steps") if isinstance(budget.get("steps"), (int, float)) else None
    newest = ctx.newest
    direction = direction_of(metric) or "lower"
    reasons, rows = [], []

    # The fit window: the current regime, its raw points when short enough, else one value per rollup bucket.
    start, why = _regime_start(ctx)
    if newest - start <= GAP_SCAN_MAX_STEPS:
        steps, values, _ = read_points(series, start=start, end=newest)
    else:
        buckets = list(Rollup.objects.filter(series=series, bucket__gte=start // ROLLUP_WIDTH, bucket__lte=newest // ROLLUP_WIDTH)
                       .order_by("bucket").values_list("last_step", "last_value"))
        steps = np.array([b[0] for b in buckets], dtype=np.int64)
        values = np.array([math.nan if b[1] is None else b[1] for b in buckets], dtype=np.float64)
    finite = np.isfinite(values)
    x, y = _binned(steps, values, FIT_BINS)

    # The recent rate: a line through the last RATE_SHARE of the window.
    rate = None
    if len(x) >= 5:
        tail = x >= x[-1] - RATE_SHARE * (x[-1] - x[0])
        if tail.sum() >= 3:
            slope = float(np.polyfit(x[tail], y[tail], 1)[0]) * 1000
            rate = -slope if direction == "lower" else slope
    current = float(y[-1]) if len(y) else None

    # Time from the points' own times.
    first_time = None
    first_block = Block.objects.filter(series=series).order_by("first_step").values_list("last_step", flat=True).first()
    if first_block is not None:
        _, t = read_point_times(series, end=first_block)
        first_time = float(t[0]) if len(t) else None
    recent_start = max(start, int(newest - max(1, RATE_SHARE * (newest - start))))
    t_steps, t_times = read_point_times(series, start=recent_start, end=newest)
    steps_per_hour = None
    if len(t_steps) >= 2 and t_times[-1] > t_times[0]:
        steps_per_hour = float((t_steps[-1] - t_steps[0]) / (t_times[-1] - t_times[0]) * 3600)
    last_time = series.last_time
    elapsed_hours = (last_time - first_time) / 3600 if first_time is not None and last_time is not None else None
    timed = own_times(series, t_times, recent_start, newest)
    if not timed:
        # Receipt times measure the sender's batches, not the training: no rate, elapsed time or finish from them.
        steps_per_hour = elapsed_hours = None

    steps_left = max(0, int(budget_steps) - newest) if budget_steps is not None else None
    hours_to_finish = steps_left / steps_per_hour if steps_left is not None and steps_per_hour else None
    gpus = _gpu_count(run)
    gpu_hours_budget = budget.get("gpu_hours") if isinstance(budget.get("gpu_hours"), (int, float)) else None
    gpu_hours_used = elapsed_hours * gpus if elapsed_hours is not None and gpus else None
    gpu_hours_to_finish = hours_to_finish * gpus if hours_to_finish is not None and gpus else None
    finish_at = last_time + hours_to_finish * 3600 if hours_to_finish is not None and last_time is not None else None
    deadline = None
    if budget.get("deadline"):
        try:
            deadline = datetime.fromisoformat(str(budget["deadline"]))
            deadline = deadline if deadline.tzinfo else deadline.replace(tzinfo=dt_timezone.utc)
        except ValueError:
            deadline = None

    if budget_steps is not None:
        rows.append({"item": "steps", "used": newest, "budget": budget_steps, "left": steps_left,
                     "detail": f"{fmt(newest)} of {fmt(budget_steps)} steps ({100 * newest / budget_steps:.0f}%), {fmt(steps_left)} left"})
        if newest > budget_steps:
            reasons.append(f"past its step budget ({fmt(newest)} of {fmt(budget_steps)})")
    else:
        rows.append({"item": "steps", "used": newest, "budget": None, "left": None, "detail": f"{fmt(newest)} steps; the budget gives no step count"})
    rows.append({"item": "run time", "used": elapsed_hours if timed else "no time data", "budget": None,
                 "left": hours_to_finish if timed else "no time data",
                 "detail": ("no time data (the points were sent without their own times)" if not timed else
                            f"{elapsed_hours:.2f} h by the points' times" if elapsed_hours is not None else "unknown")
                 + (f"; {steps_per_hour:,.0f} steps/h recently" if steps_per_hour else "")
                 + (f"; {hours_to_finish:.2f} h to finish" if hours_to_finish is not None else "")})
    if gpu_hours_budget is not None or gpus:
        detail = []
        if gpu_hours_used is not None:
            detail.append(f"{gpu_hours_used:.1f} GPU-h used ({fmt(gpus)} GPUs)")
        if gpu_hours_to_finish is not None:
            detail.append(f"{gpu_hours_to_finish:.1f} GPU-h to finish")
        if gpu_hours_budget is not None:
            detail.append(f"budget {fmt(gpu_hours_budget)} GPU-h")
        if gpus is None:
            detail.append("GPU count unknown (config `gpus` or `world_size`): GPU-hours used not known")
        rows.append({"item": "GPU-hours", "used": gpu_hours_used, "budget": gpu_hours_budget,
                     "left": gpu_hours_to_finish, "detail": "; ".join(detail)})
        if gpu_hours_budget is not None and gpu_hours_used is not None and gpu_hours_to_finish is not None \
                and gpu_hours_used + gpu_hours_to_finish > gpu_hours_budget:
            reasons.append(f"needs {gpu_hours_used + gpu_hours_to_finish:.1f} GPU-h against a budget of {fmt(gpu_hours_budget)}")
    if deadline is not None:
        finish_words = datetime.fromtimestamp(finish_at, dt_timezone.utc).isoformat() if finish_at is not None else None
        rows.append({"item": "deadline", "used": None, "budget": deadline.isoformat(), "left": finish_words,
                     "detail": f"deadline {deadline.isoformat()}" + (f"; finishes about {finish_words}" if finish_words else "")})
        if finish_at is not None and finish_at > deadline.timestamp():
            reasons.append(f"finishes after its deadline (about {finish_words})")

    # The projection.
    projection = None
    target = _target(ctx, metric)
    no_projection = None
    at_end = budget_steps is not None and newest >= budget_steps
    if budget_steps is None:
        no_projection = "the budget gives no step count"
    elif at_end:
        no_projection = f"at the end of its budget ({fmt(newest)} of {fmt(budget_steps)} steps), nothing is left to project"
    elif int(finite.sum()) < FIT_MIN_POINTS:
        no_projection = f"too few points in the current regime ({int(finite.sum())} < {FIT_MIN_POINTS})"
    elif budget_steps - newest > EXTRAPOLATION_LIMIT * max(1, newest - start):
        no_projection = (f"the budget's end is {fmt(budget_steps - newest)} steps ahead, more than {EXTRAPOLATION_LIMIT:g}x "
                         f"the {fmt(newest - start)} steps of history fitted")
    else:
        fit = fit_saturating(x, y, float(max(budget_steps, newest)) + 1)
        if fit["ok"]:
            projection = {"metric": metric, "at_step": budget_steps, "value": fit["value"], "low": fit["low"], "high": fit["high"],
                          "r2": fit["r2"], "model": f"{metric} = a + b·((step + 1)/{fmt(x.max())})^-c",
                          "a": fit["a"], "b": fit["b"], "c": fit["c"], "fit_from_step": start, "fit_to_step": newest,
                          "fit_start_reason": why, "points": int(finite.sum()), "interval": "95% residual bootstrap"}
        else:
            no_projection = fit["why"]
    target_row = None
    if target is not None:
        if projection is not None:
            reach = projection["value"] <= target if direction == "lower" else projection["value"] >= target
            best = projection["low"] if direction == "lower" else projection["high"]
            reach_best = best <= target if direction == "lower" else best >= target
            projection["target"] = target
            projection["reaches_target"] = bool(reach)
            if not reach:
                reasons.append(f"projected {metric} {fmt(projection['value'])} at step {fmt(budget_steps)} does not reach its "
                               f"target {fmt(target)}" + ("" if reach_best else " (not even at the interval's best end)"))
            target_row = f"projected {'reaches' if reach else 'misses'} {fmt(target)}"
        else:
            target_row = f"no projection to judge the target {fmt(target)} by"
    rows.append({"item": metric, "used": current, "budget": target, "left": None,
                 "detail": (f"now {fmt(current)}" if current is not None else "no finite value")
                 + (f"; improving {fmt(rate)} per 1,000 steps" if rate is not None and rate > 0 else
                    f"; worsening {fmt(-rate)} per 1,000 steps" if rate is not None and rate < 0 else "")
                 + (f"; projected {fmt(projection['value'])} at step {fmt(budget_steps)} (95% {fmt(projection['low'])}–{fmt(projection['high'])})"
                    if projection else f"; no projection: {no_projection}")
                 + (f"; {target_row}" if target_row else "")})

    if reasons:
        state = StepState.ATTENTION
        summary = "; ".join(reasons)
    elif at_end:
        state = StepState.NO_DATA
        summary = f"At the end of its budget ({fmt(newest)} of {fmt(budget_steps)} steps): no projection"
    elif projection is None:
        state = StepState.NO_DATA
        summary = f"No projection: {no_projection}"
    else:
        state = StepState.PASS
        summary = (f"{metric} projected {fmt(projection['value'])} (95% {fmt(projection['low'])}–{fmt(projection['high'])}) "
                   f"at step {fmt(budget_steps)}" + (f", reaching its target {fmt(target)}" if target is not None else "")
                   + (f"; {hours_to_finish:.1f} h to finish" if hours_to_finish is not None else ""))
    summary = summary[:1].upper() + summary[1:]
    findings = {
        "columns": [["item", "Item"], ["used", "Used / now"], ["budget", "Budget / target"], ["left", "Left / to finish"], ["detail", "In words"]],
        "rows": rows,
        "metric": metric,
        "direction": direction,
        "current": current,
        "rate_per_1000_steps": rate,
        "steps_per_hour": steps_per_hour,
        "elapsed_hours": elapsed_hours,
        "hours_to_finish": hours_to_finish,
        "gpus": gpus,
        "gpu_hours_used": gpu_hours_used,
        "gpu_hours_to_finish": gpu_hours_to_finish,
        "target": target,
        "projection": projection,
        "no_projection": no_projection if projection is None else None,
        "sections": [],
    }
    evidence = [{"label": f"{metric} over the fitted history (steps {fmt(start)}-{fmt(newest)})",
                 "href": run_href(run, metric, component, start, newest)}]
    return step_result(5, state, summary, findings, evidence)
