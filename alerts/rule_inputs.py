"""A rule's scope, persistence and params as labelled inputs (the console's rule form), and back.

Each `*_from` turns the inputs' text into the stored object plus {input name: message}, every message naming
the input in words ("Persistence → fire after: must be a whole number ≥ 1"); each `*_inputs` is the inverse, for
the edit page, and answers None when a stored object has something the inputs cannot say (a row written by rules
as code or before validation existed), so the form shows that one as JSON instead of dropping part of it.

Pure functions over strings and dicts: the form (alerts/forms.py) owns the fields, this module the meaning.
"""
import math
import re

from alerts.params import CHOICE, KIND_PARAMS, NAME, WHOLE, Param, params_errors

ARROW = " → "

# --- scope ------------------------------------------------------------------------

SCOPE_LISTS = {"metrics": "scope_metrics", "conditions": "scope_conditions", "phases": "scope_phases"}
EVERY, RUN_ONLY, MATCHING = "every", "run", "matching"
COMPONENT_CHOICES = (
    (EVERY, "every component, and the run as a whole"),
    (RUN_ONLY, "the run as a whole only"),
    (MATCHING, "components matching the pattern below"),
)
TAG_RE = re.compile(r"^\s*([^=,\s][^=,]*?)\s*=\s*([^=,]*?)\s*$")


def split_names(text: str) -> list[str]:
    """'loss, grad_norm*' → ['loss', 'grad_norm*']: commas or new lines between names."""
    return [name.strip() for name in re.split(r"[,\n]", text or "") if name.strip()]


def scope_from(values: dict) -> tuple[dict, dict]:
    scope, errors = {}, {}
    for key, input_name in SCOPE_LISTS.items():
        names = split_names(values.get(input_name, ""))
        if names:
            scope[key] = names
    mode = values.get("scope_components") or EVERY
    pattern = (values.get("scope_component") or "").strip()
    if mode == RUN_ONLY:
        scope["component"] = ""
    elif mode == MATCHING:
        if pattern:
            scope["component"] = pattern
        else:
            errors["scope_component"] = f"Scope{ARROW}component pattern: give a pattern to match, e.g. blocks.*"
    if pattern and mode != MATCHING:
        errors["scope_component"] = (f"Scope{ARROW}component pattern: used only with “components matching the "
                                     "pattern below”; choose that, or leave the pattern empty")
    layer = (values.get("scope_layer") or "").strip()
    if layer:
        scope["layer"] = layer
    runs = {}
    for part in split_names(values.get("scope_runs", "")):
        match = TAG_RE.match(part)
        if not match:
            errors["scope_runs"] = (f"Scope{ARROW}run tags: write each tag as key=value, separated by commas "
                                    f"(e.g. team=pretrain), not “{part[:40]}”")
            break
        runs[match.group(1)] = match.group(2)
    if runs:
        scope["runs"] = runs
    return scope, errors


def scope_inputs(scope) -> dict | None:
    if not isinstance(scope, dict):
        return None
    values = {name: ", ".join(scope[key]) if isinstance(scope.get(key), list) else ""
              for key, name in SCOPE_LISTS.items()}
    component = scope.get("component")
    values["scope_components"] = EVERY if "component" not in scope else RUN_ONLY if component == "" else MATCHING
    values["scope_component"] = component if values["scope_components"] == MATCHING else ""
    values["scope_layer"] = scope.get("layer") or ""
    runs = scope.get("runs")
    values["scope_runs"] = ", ".join(f"{k}={v}" for k, v in runs.items()) if isinstance(runs, dict) else ""
    return values if _round_trips(scope, scope_from(values)) else None


# --- persistence ------------------------------------------------------------------

POINTS, STEPS, SECONDS = "points", "steps", "seconds"
UNIT_CHOICES = (
    (POINTS, "points in a row"),
    (STEPS, "steps the condition has held"),
    (SECONDS, "seconds the condition has held"),
)


def persistence_from(values: dict) -> tuple[dict, dict]:
    """Everything empty is {}: governance then says persistence is required, as every other path does."""
    persistence, errors = {}, {}
    unit = values.get("persistence_unit") or POINTS
    count = (values.get("persistence_count") or "").strip()
    resolve = (values.get("persistence_resolve_points") or "").strip()
    until_reviewed = bool(values.get("persistence_until_reviewed"))
    if count:
        value = parse_number(count)
        if unit == SECONDS:
            if value is None or value <= 0:
                errors["persistence_count"] = (f"Persistence{ARROW}fire after: must be a number of seconds > 0, "
                                               f"not “{count[:40]}”")
        elif value is None or value < 1 or value != int(value):
            errors["persistence_count"] = (f"Persistence{ARROW}fire after: must be a whole number of {unit} ≥ 1, "
                                           f"not “{count[:40]}”")
        if "persistence_count" not in errors:
            persistence[unit] = value if unit == SECONDS else int(value)
    elif resolve or until_reviewed:
        errors["persistence_count"] = f"Persistence{ARROW}fire after: required: how many {unit} before the rule fires"
    if resolve:
        value = parse_number(resolve)
        if value is None or value < 1 or value != int(value):
            errors["persistence_resolve_points"] = (f"Persistence{ARROW}resolve after: must be a whole number of "
                                                    f"clear points ≥ 1, not “{resolve[:40]}”")
        else:
            persistence["resolve_points"] = int(value)
    if until_reviewed:
        persistence["until_reviewed"] = True
    return persistence, errors


def persistence_inputs(persistence) -> dict | None:
    if not isinstance(persistence, dict):
        return None
    unit = next((u for u, _ in UNIT_CHOICES if u in persistence), POINTS)
    values = {
        "persistence_unit": unit,
        "persistence_count": number_text(persistence.get(unit)),
        "persistence_resolve_points": number_text(persistence.get("resolve_points")),
        "persistence_until_reviewed": persistence.get("until_reviewed") is True,
    }
    return values if _round_trips(persistence, persistence_from(values)) else None


# --- params -----------------------------------------------------------------------

def input_name(kind: str, param: Param) -> str:
    return f"param_{kind}_{param.name}"


def kind_title(kind: str) -> str:
    return f"{kind.replace('_', ' ').capitalize()} settings"


def params_from(kind: str, values: dict) -> tuple[dict, dict]:
    """Only the inputs given: an empty one is the kind's default, as a missing key is in JSON."""
    params, errors = _parse_params(kind, values)
    if not errors:
        errors.update(together_errors(kind, params))
    return params, errors


def _parse_params(kind: str, values: dict) -> tuple[dict, dict]:
    params, errors = {}, {}
    for param in KIND_PARAMS.get(kind, ()):
        name = input_name(kind, param)
        text = (values.get(name) or "").strip()
        if not text:
            continue
        value = text if param.type in (CHOICE, NAME) else parse_number(text)
        if value is not None and param.type == WHOLE and value == int(value):
            value = int(value)
        if value is None or param.error(value):
            errors[name] = (f"{kind_title(kind)}{ARROW}{param.label.lower()}: must be {param.expectation()}, "
                            f"not “{text[:40]}”")
        else:
            params[param.name] = value
    return params, errors


def together_errors(kind: str, params: dict) -> dict:
    """What the kind needs of its params together ("below must be less than above"), on the input it names, in words."""
    spec = {p.name: p for p in KIND_PARAMS.get(kind, ())}
    errors = {}
    for path, message in params_errors(kind, params).items():
        key = path.removeprefix("params.")
        if key in spec:
            label = spec[key].label.lower()
            errors[input_name(kind, spec[key])] = f"{kind_title(kind)}{ARROW}{label}: {_in_words(message, spec)}"
    return errors


def params_inputs(kind: str, params) -> dict | None:
    """A stored rule whose params break a rule of the kind together (below ≥ above) is still shown in its inputs:
    saving it again says what is wrong, on the input."""
    if not isinstance(params, dict) or kind not in KIND_PARAMS:
        return None
    values = {input_name(kind, p): params[p.name] if p.type in (CHOICE, NAME) else number_text(params[p.name])
              for p in KIND_PARAMS[kind] if p.name in params}
    if not all(isinstance(v, str) for v in values.values()):
        return None
    return values if _round_trips(params, _parse_params(kind, values)) else None


# --- numbers ----------------------------------------------------------------------

def parse_number(text: str):
    """'3' → 3, '0.5' → 0.5, '1e3' → 1000.0; None for text that is no finite number."""
    text = text.strip()
    if re.fullmatch(r"[+-]?\d{1,300}", text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def number_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _round_trips(stored: dict, built_and_errors: tuple[dict, dict]) -> bool:
    built, errors = built_and_errors
    return not errors and _same(stored, built)


def _same(a, b) -> bool:
    """Equal, with true never standing for 1 (Python's True == 1 would let a stored `true` pass as a number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _in_words(message: str, spec: dict) -> str:
    """'min_history must be at most window' → 'min history must be at most window'."""
    for name in sorted(spec, key=len, reverse=True):
        message = re.sub(rf"\b{re.escape(name)}\b", spec[name].label.lower(), message)
    return message
