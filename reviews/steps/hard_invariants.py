"""Step 2 of a run review: hard invariants (non-finite values, missing steps and stalls, synchronisation,
data contracts, checkpoint integrity)."""
from __future__ import annotations

import numpy as np
from django.db.models import Max, Min, Q, Sum

from alerts.models import AlertState, RuleKind
from ingest.models import ROLLUP_WIDTH, Block, Rollup, RunStatus
from ingest.storage import read_points, unpack
from reviews.models import StepState
from reviews.steps.checkpoints import checkpoint_steps
from reviews.steps.shared import GAP_SCAN_MAX_STEPS, MAX_ROWS, Context, alert_href, fmt, run_href, section, step_result

# Settings (named, so the page and the tests can say what was used).

# A component of a metric lags when its last step is this far behind the metric's newest step,
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
