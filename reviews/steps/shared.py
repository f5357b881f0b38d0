"""What the five automatic steps share: the Context they read once per fill, and how a step's result is written.

Every step is a dict:

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
from datetime import datetime
from urllib.parse import urlencode

import numpy as np
from django.db.models import F
from django.urls import reverse

from alerts.chart import HEADLINE_METRICS
from alerts.models import Alert, AlertState
from ingest.models import Block, Run, Series
from ingest.phases import phase_spans
from ingest.storage import read_point_times
from ingest.wire import wire_value

# Settings more than one step uses (named, so the page and the tests can say what was used).

# Raw points are read for windows up to this many steps, the rollups beyond: step 2 then finds only gaps of
# whole rollup buckets (ROLLUP_WIDTH steps), and step 5 fits one value per bucket.
GAP_SCAN_MAX_STEPS = 200_000
MAX_ROWS = 50  # rows a table keeps (its `total` counts them all), and evidence links a step keeps

# Steps 3-5: which way is better, by the metric's name (the last part of eval/<slice>/<metric>).
LOWER_IS_BETTER = ("loss", "error", "err", "perplexity", "ppl", "wer", "cer", "mse", "mae", "rmse", "nll")
HIGHER_IS_BETTER = ("accuracy", "acc", "f1", "auc", "bleu", "rouge", "score", "precision", "recall", "exact_match", "em", "map")


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


def default_comparison(run) -> Run | None:
    """The run's reference run: the newest reference run of its project (by last data), not itself."""
    return (Run.objects.filter(project_id=run.project_id, reference=True).exclude(pk=run.pk)
            .order_by(F("last_seen_at").desc(nulls_last=True), "-id").first())



def direction_of(metric: str) -> str | None:
    """"lower" or "higher" is better, by the metric's last name part; None when the name does not say."""
    name = metric.rsplit("/", 1)[-1].lower()
    words = set(name.replace("-", "_").replace(".", "_").split("_"))
    if any(w in words for w in LOWER_IS_BETTER) or any(name.endswith(w) for w in ("loss", "error", "perplexity")):
        return "lower"
    if any(w in words for w in HIGHER_IS_BETTER) or any(name.endswith(w) for w in ("accuracy", "score")):
        return "higher"
    return None
