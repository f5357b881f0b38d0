"""Step 5 of a run review: remaining value (budget used and left, and the chosen metric projected to the budget's end)."""
from __future__ import annotations

import math
from datetime import datetime, timezone as dt_timezone

import numpy as np

from ingest.models import ROLLUP_WIDTH, Block, Rollup
from ingest.phases import IMPLICIT_WARMUP_SHARE
from ingest.storage import read_point_times, read_points
from reviews.models import StepState
from reviews.steps.shared import GAP_SCAN_MAX_STEPS, Context, direction_of, fmt, own_times, run_href, step_result

# Settings (named, so the page and the tests can say what was used).

# The saturating fit y = a + b * (step / s)^-c on the current regime's history.
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
