"""Step 4 of a run review: slices (each evaluated slice against the aggregate, since the last review)."""
from __future__ import annotations

import math

import numpy as np

from ingest.storage import read_points_of_many
from reviews.models import StepState
from reviews.steps.shared import Context, direction_of, fmt, run_href, step_result

# Settings (named, so the page and the tests can say what was used).

SLICE_PREFIXES = ("eval", "val")
AGGREGATE_SLICES = ("all", "overall")  # a slice of these names stands for the aggregate when no eval/<metric> is sent
SLICE_WORSE_FACTOR = 1.5
SLICE_CHANGE_TOLERANCE = 0.01  # changes smaller than 1% of the earlier value are "unchanged"
MAX_SLICE_SERIES = 500  # sliced series judged (by name); more are left out and counted


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
