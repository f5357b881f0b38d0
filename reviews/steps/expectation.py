"""Step 3 of a run review: expectation (band-like alerts, and the run beside its reference runs)."""
from __future__ import annotations

import math

import numpy as np
from django.db.models import F, Q

from alerts.models import RuleKind
from ingest.models import Run, Series
from ingest.storage import read_points
from reviews.models import StepState
from reviews.steps.shared import Context, alert_href, direction_of, fmt, run_href, section, step_result

# Settings (named, so the page and the tests can say what was used).

# Band-like alerts (the run against its expected behaviour), and the comparison with references.
EXPECTATION_RULE_KINDS = (RuleKind.BAND, RuleKind.DIVERGENCE, RuleKind.WEIGHT_JUMP, RuleKind.REFERENCE)
REFERENCE_LIMIT = 5  # newest reference runs beside the run when the reviewer chose none
COMPARE_WINDOW_STEPS = 50  # each compared value is the mean of the finite values of this many steps up to it
COMPARE_POINTS = (0.25, 0.5, 0.75, 1.0)  # where the run is compared: shares of the newest common step
# Attention when the run is worse than its reference(s) by more than this share at the newest common step.
EXPECTATION_WORSE_SHARE = 0.10


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
