"""Step 1 of a run review: identity (the run's identity and config, and its changes since the last review)."""
from __future__ import annotations

from reviews.models import StepState
from reviews.steps.shared import Context, run_href, section, step_result
from reviews.templatetags.words import words
from runs.detail import budget_words


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
