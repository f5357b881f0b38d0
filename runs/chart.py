"""Chart data: one series in at most N buckets, with the band the rules check (the band drawn is the band judged)."""
import numpy as np

from alerts.bands import BandParams, series_band
from alerts.evaluation import series_selected, chart_band
from alerts.models import BandSample, Rule, RuleKind
from ingest.models import Attempt, Block

MAX_BUCKETS = 5000


def finite_or_none(values):
    return [None if not np.isfinite(v) else float(v) for v in values.tolist()]


def band_rule_for(series):
    """The project's first enabled band rule covering the series: its band is the one drawn."""
    for rule in Rule.objects.filter(project_id=series.run.project_id, kind=RuleKind.BAND, enabled=True).order_by("name"):
        if series_selected(rule, series.metric, series.component, series.layer):
            return rule
    return None


def stored_band(series, rule, start, end, buckets):
    rows = BandSample.objects.filter(rule=rule, series=series)
    if start is not None:
        rows = rows.filter(step__gte=start)
    if end is not None:
        rows = rows.filter(step__lte=end)
    rows = list(rows.order_by("bucket").values_list("step", "centre", "lower", "upper"))
    rows = rows[:: max(1, -(-len(rows) // buckets))]
    if not rows:
        empty = np.array([])
        return empty.astype(np.int64), empty, empty, empty
    steps, centre, lower, upper = zip(*rows)
    as_float = lambda col: np.array([np.nan if v is None else v for v in col], dtype=float)  # noqa: E731
    return np.array(steps, dtype=np.int64), as_float(centre), as_float(lower), as_float(upper)


def current_band(series, steps, centre, lower, upper):
    """The band as the run's current attempt stands, in step order, broken at every change of attempt.

    A rewound run keeps the abandoned attempt's points past where the current
    attempt has reached (the chart still draws them); the band there was judged
    against that attempt's history, not the current one's, so it is left out.
    Where the attempt changes, the band starts again (another history, the
    restore check): an entry of nulls between the two keeps a chart from
    joining them into one shape.
    """
    if not len(steps):
        return steps, centre, lower, upper
    owner = np.zeros(len(steps), dtype=np.int64)  # the attempt whose point a band sample stands on
    blocks = Block.objects.filter(series=series, last_step__gte=int(steps[0]), first_step__lte=int(steps[-1]))
    for attempt, first, last in blocks.order_by("attempt").values_list("attempt", "first_step", "last_step"):
        owner[np.searchsorted(steps, first, "left"):np.searchsorted(steps, last, "right")] = attempt
    # An attempt's points are history until a later attempt resumes at or before them.
    resumed, superseded_from = np.inf, {}
    for number, start in Attempt.objects.filter(run_id=series.run_id).order_by("-number").values_list("number", "start_step"):
        superseded_from[number] = resumed
        if start is not None:
            resumed = min(resumed, start)
    keep = steps < np.array([superseded_from.get(a, np.inf) for a in owner.tolist()])
    steps, owner, centre, lower, upper = (a[keep] for a in (steps, owner, centre, lower, upper))
    breaks = np.flatnonzero(owner[1:] != owner[:-1]) + 1
    return (np.insert(steps, breaks, steps[breaks]), *(np.insert(a, breaks, np.nan) for a in (centre, lower, upper)))


def band_for_chart(series, data, start, end, buckets) -> dict:
    """The band to draw beside `data` (series_buckets' answer): the one the project's band rule judged with."""
    rule = band_rule_for(series)
    every = max(1, int(data.count.sum()) // max(buckets, 1))
    if rule is not None and data.resolution == "rollup":
        # Wide: the band evaluation stored as it judged, one per 128-step bucket.
        steps, centre, lower, upper = stored_band(series, rule, start, end, buckets)
    elif rule is not None:
        # Zoomed: the rule's own judge, replayed over the raw points.
        steps, centre, lower, upper = chart_band(series, rule, start, end, every=every)
    else:
        steps, centre, lower, upper = series_band(series, start, end, BandParams(), every=every)
    steps, centre, lower, upper = current_band(series, steps, centre, lower, upper)
    return {
        "rule": rule.name if rule else None,
        "step": steps.tolist(),
        "centre": finite_or_none(centre),
        "lower": finite_or_none(lower),
        "upper": finite_or_none(upper),
    }
