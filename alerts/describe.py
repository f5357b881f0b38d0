"""A rule in words, for the console's rules pages: scope, persistence, response, stats and revision diffs.

Pure functions over a rule's stored fields (and counts), so the pages and their
tests read a rule the same way the engine (alerts/evaluation.py) judges it.
"""

from django.db.models import Count, Q

from alerts import evaluation
from alerts.params import KIND_PARAMS as PARAM_SPECS, default, describe_kind, params_errors
from alerts.models import AlertState, Verdict

# Threshold and band rules skip the engine's default phases unless the scope names phases (alerts/evaluation.py).
_PHASE_ORDER = ("warmup", "eval", "checkpoint", "restart", "data_refresh")
DEFAULT_SKIPPED_PHASES = tuple(
    sorted(evaluation.DEFAULT_SKIPPED_PHASES, key=lambda p: (_PHASE_ORDER.index(p) if p in _PHASE_ORDER else len(_PHASE_ORDER), p))
)
PHASE_SKIPPING_KINDS = ("threshold", "band")
OPEN_STATES = [AlertState.FIRING, AlertState.ACKNOWLEDGED, AlertState.MUTED]

RESPONSE_WORDS = {
    "observe": "recorded on the console only; nobody is paged",
    "notify": "the owner is notified",
    "review": "queued for the owner's review",
    "stop": "the job is told to stop (automatic, in projects that have left read-only mode)",
    "rewind": "the job is told to rewind to its last good checkpoint (automatic, in projects that have left read-only mode)",
}

# What each kind's `params` mean, shown next to the form's params field: from the validator (alerts/params.py).
KIND_PARAMS = {kind: describe_kind(kind) for kind in PARAM_SPECS}


def _plural(n, word):
    return f"{_number(n)} {word}{'' if n == 1 else 's'}"


def _number(value):
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _duration(seconds):
    seconds = float(seconds)
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{_number(seconds)} s ({_number(seconds / 3600)} h)"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{_number(seconds)} s ({_number(seconds / 60)} min)"
    return f"{_number(seconds)} s"


def persistence_words(persistence) -> str:
    """'fires after 3 points in a row; resolves after 10 clear points in a row'."""
    if not isinstance(persistence, dict) or not persistence:
        return "—"
    if "points" in persistence:
        n = persistence["points"]
        fires = "fires on the first point" if n == 1 else f"fires after {_plural(n, 'point')} in a row"
    elif "steps" in persistence:
        fires = f"fires once the condition has held for {_plural(persistence['steps'], 'step')}"
    elif "seconds" in persistence:
        fires = f"fires once the condition has held for {_duration(persistence['seconds'])}"
    else:
        fires = "fires (no points, steps or seconds given)"
    m = persistence.get("resolve_points", 1)
    resolves = "resolves on the first clear point" if m == 1 else f"resolves after {_plural(m, 'clear point')} in a row"
    if persistence.get("until_reviewed") is True:
        resolves += ", then waits for a person (needs review)"
    return f"{fires}; {resolves}"


def scope_rows(scope, kind) -> list[dict]:
    """The scope as labelled rows: {label, text (plain words), values (shown as code), note}."""
    scope = scope if isinstance(scope, dict) else {}
    rows = []

    def row(label, text="", values=(), note=""):
        rows.append({"label": label, "text": text, "values": list(values), "note": note})

    if scope.get("metrics"):
        row("Metrics", values=scope["metrics"])
    if scope.get("conditions"):
        row("Event conditions", values=scope["conditions"])
    component = scope.get("component", "*")
    if component in ("*", None):
        row("Components", "every component, and the run as a whole")
    elif component == "":
        row("Components", "the run as a whole only", note="no per-component series")
    else:
        row("Components", "matching", [component])
    if scope.get("layer"):
        row("Layer", values=[scope["layer"]])
    else:
        row("Layer", "any layer")
    if scope.get("phases"):
        row("Phases", "only", scope["phases"])
    elif kind in PHASE_SKIPPING_KINDS:
        row("Phases", "all except", DEFAULT_SKIPPED_PHASES, note="the default for threshold and band rules")
    else:
        row("Phases", "all phases")
    runs = scope.get("runs") or {}
    if runs:
        row("Runs", "tagged", [f"{k}={v}" for k, v in runs.items()])
    else:
        row("Runs", "every run of the project")
    return rows


def kind_words(kind, params) -> str:
    """What makes a point 'held' for this kind, in one phrase."""
    if params_errors(kind, params):
        return "— (its params are not valid; the rule is not judged until they are fixed)"
    params = params if isinstance(params, dict) else {}
    if kind == "nonfinite":
        count = params.get("count", 1)
        if count > 1:
            within = params.get("within", count)
            return f"{_plural(count, 'value')} of the last {within} are NaN or ±Infinity (a rate, not one overflow)"
        return "a value is NaN or ±Infinity"
    if kind == "threshold":
        parts = []
        if params.get("above") is not None:
            parts.append(f"above {_number(params['above'])}")
        if params.get("below") is not None:
            parts.append(f"below {_number(params['below'])}")
        words = f"a value is {' or '.join(parts)}" if parts else "a value crosses its threshold (none set)"
        if params.get("persistence_seconds"):
            words += f", for at least {_duration(params['persistence_seconds'])} of the job's own time"
        return words
    if kind == "band":
        direction = params.get("direction", default("band", "direction"))
        side = {"above": "above", "below": "below"}.get(direction, "outside")
        width = f" ({_number(params['width'])} robust σ wide)" if params.get("width") is not None else ""
        words = f"a value is {side} its phase-aware band{width}"
        if params.get("per"):
            words = words.replace("a value is", f"a value per unit of {params['per']} is", 1)
        if params.get("scale") == "ratio":
            cap = params.get("max_ratio", 4.0)
            words += f", judged as a ratio to its level (at most ×/÷ {_number(cap)})"
            if params.get("drift_ratio") is not None:
                words += f" and never more than ×/÷ {_number(params['drift_ratio'])} from its level a window earlier"
        if params.get("persistence_seconds"):
            words += f", for at least {_duration(params['persistence_seconds'])} of the job's own time"
        return words
    if kind == "absence":
        parts = []
        if params.get("missing_steps") is not None:
            parts.append(f"more than {_plural(params['missing_steps'], 'step')} are missing in a row")
        if params.get("seconds") is not None:
            parts.append(f"more than {_duration(params['seconds'])} pass without a point")
        if params.get("behind_steps") is not None:
            parts.append(f"a series sends nothing while the run moves more than "
                         f"{_plural(params['behind_steps'], 'step')} past it")
        return " or ".join(parts) if parts else "data goes missing"
    if kind == "event":
        return "the job reports a health event" + (
            f" of magnitude ≥ {_number(params['min_magnitude'])}" if params.get("min_magnitude") is not None else ""
        )
    if kind == "divergence":
        k = params.get("evaluations", default("divergence", "evaluations"))
        training = params.get("training", "the training metric")
        words = f"the validation metric rises at {_plural(k, 'evaluation')} in a row while {training} falls"
        if params.get("fast_rise") is not None:
            words += (f", or rises and stands {_number(params['fast_rise'] * 100)}% above its lowest evaluation while "
                      f"{training} is below where it was then")
        return words
    if kind == "reference":
        ratio = _number(params.get("ratio", default("reference", "ratio")))
        side = {"above": f"above × {ratio} the highest", "below": f"below ÷ {ratio} the lowest"}.get(
            params.get("direction", "above"), f"beyond × / ÷ {ratio} the extremes")
        return f"a value is {side} of the project's reference runs at the same step (quiet without reference runs)"
    if kind == "weight_jump":
        allowance = params.get("allowance", default("weight_jump", "allowance"))
        return (f"a component's weight norm changes between two samples by more than {_number(allowance)} × what its "
                f"update_ratio allows (else its own history), and by at least ×"
                f"{_number(params.get('min_ratio', default('weight_jump', 'min_ratio')))}")
    return kind or "—"


def param_rows(params) -> list[tuple[str, str]]:
    if not isinstance(params, dict):
        return []
    return [(key, value_text(value)) for key, value in params.items()]


def param_words(kind, params) -> list[dict]:
    """The rule page's params, each in words ({label, value, meaning}): "Width 10", never a key or a JSON object."""
    if not isinstance(params, dict):
        return []
    spec = {p.name: p for p in PARAM_SPECS.get(kind, ())}
    rows = []
    for key, value in params.items():
        param = spec.get(key)
        rows.append({
            "label": param.label if param else str(key).replace("_", " ").capitalize(),
            "value": value_text(value),
            "meaning": param.meaning.replace("`", "") if param else "not a setting of this kind",
        })
    return rows


def value_text(value) -> str:
    """A snapshot or params value as short text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or value == "":
        return "(empty)"
    if isinstance(value, dict):
        # "points 3; resolve points 10": a person reads the keys as words, never a JSON object.
        return "; ".join(f"{str(k).replace('_', ' ')} {value_text(v)}" for k, v in value.items()) or "(empty)"
    if isinstance(value, list):
        return ", ".join(value_text(v) for v in value) or "(none)"
    return _number(value)


# --- stats ----------------------------------------------------------------------

def with_stats(rules):
    """Annotate a Rule queryset with fire_count, verdict_count, false_alarm_count and open_count."""
    return rules.annotate(
        fire_count=Count("alerts", distinct=True),
        verdict_count=Count("alerts", filter=Q(alerts__verdict__isnull=False), distinct=True),
        false_alarm_count=Count("alerts", filter=Q(alerts__verdict=Verdict.FALSE_ALARM), distinct=True),
        open_count=Count("alerts", filter=Q(alerts__state__in=OPEN_STATES), distinct=True),
    )


def false_alarm_rate(false_alarms: int, verdicts: int) -> str:
    """'50% (1 of 2)': false alarms among the alerts that have a verdict; '—' before any verdict."""
    if not verdicts:
        return "—"
    return f"{round(100 * false_alarms / verdicts)}% ({false_alarms} of {verdicts})"


def mute_counts(rule_ids) -> dict:
    """{rule id: number of mutes ever set on it}."""
    from alerts.models import Mute

    rows = Mute.objects.filter(rule_id__in=list(rule_ids)).values("rule_id").annotate(n=Count("pk"))
    return {row["rule_id"]: row["n"] for row in rows}


# --- revisions ------------------------------------------------------------------

def revision_history(revisions) -> list[dict]:
    """Revisions (oldest first in) as entries, newest first, each with what changed since the one before."""
    entries = []
    previous = None
    for revision in revisions:
        snapshot = revision.snapshot or {}
        changes = []
        if previous is not None and revision.action != "deleted":
            for key in dict.fromkeys([*previous, *snapshot]):
                if previous.get(key) != snapshot.get(key):
                    changes.append({"field": key, "old": value_text(previous.get(key)), "new": value_text(snapshot.get(key))})
        entries.append({"revision": revision, "changes": changes, "first": previous is None})
        previous = snapshot
    entries.reverse()
    return entries
