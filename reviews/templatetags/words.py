"""`{% load words %}`: values of the review steps in words for people: numbers with thousands separators and a
few significant digits, yes/no for booleans, "key value" lists for objects — never a Python or JSON literal."""
from __future__ import annotations

import math

from django import template
from django.forms.utils import pretty_name

from reviews.models import StepState

register = template.Library()

# A check's state in a step's table ("no data", not "no_data").
STATE_WORDS = {str(state): str(state.label).lower() for state in StepState}

# Findings that are the step's tables, or the fit's internals a reviewer does not read (the model's constants
# are in the projection's formula only for the API).
HIDDEN_FACTS = {"columns", "rows", "sections", "a", "b", "c", "model", "fit_start_reason", "interval"}
# Labels where the field's name is not the words.
FACT_LABELS = {
    "r2": "R²", "rate_per_1000_steps": "rate per 1,000 steps", "gpus": "GPUs", "gpu_hours_used": "GPU-hours used",
    "gpu_hours_to_finish": "GPU-hours to finish", "no_projection": "no projection", "at_step": "at step",
    "last_checkpoint_step": "last checkpoint at step", "usual_interval": "usual interval (steps)",
    "steps_since": "steps since the last checkpoint", "checkpoint_time_alerts": "checkpoint time alerts",
}


def number(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return {math.inf: "infinite", -math.inf: "minus infinite"}.get(value, "not a number")
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if value != 0 and (abs(value) >= 1e15 or abs(value) < 1e-4):
        return f"{value:.3g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"  # four significant digits, no trailing zeros


def exact(value) -> str:
    """A number as the sender wrote it (config and tags are identity: 0.00031415 stays so), booleans as words."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return words(value, True) if isinstance(value, (dict, list, tuple)) else str(value)


@register.filter
def words(value, exact_numbers=False) -> str:
    """Any findings value as text a person reads; `exact_numbers`: numbers as sent, not rounded (identity)."""
    if value is None or value == "":
        return "—"
    if isinstance(value, (bool, int, float)):
        return exact(value) if exact_numbers else number(value)
    if isinstance(value, str):
        if value in STATE_WORDS:
            return STATE_WORDS[value]
        return {"NaN": "not a number", "Infinity": "infinite", "-Infinity": "minus infinite"}.get(value, value)
    if isinstance(value, dict):
        return "; ".join(f"{label(k)} {words(v, exact_numbers)}" for k, v in value.items()) or "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(words(v, exact_numbers) for v in value) or "none"
    return str(value)


def label(key) -> str:
    key = str(key)
    return FACT_LABELS.get(key, key.replace("_", " "))


@register.filter
def facts(findings) -> list[tuple[str, str]]:
    """A step's findings beyond its tables, as (label, words) lines; objects one level deep are flattened, their
    keys said once ("checkpoints 0", not "checkpoint checkpoints 0")."""
    lines = []
    for key, value in (findings or {}).items():
        if key in HIDDEN_FACTS or value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                if k in HIDDEN_FACTS or v in (None, "", [], {}) or isinstance(v, (dict, list)):
                    continue
                # The object's name once: "checkpoints 1", "last checkpoint at step 300".
                name = label(k) if str(key).rstrip("s") in str(k) else f"{label(key)} {label(k)}"
                lines.append((name, words(v)))
        elif not isinstance(value, list):
            lines.append((label(key), words(value)))
    return lines


@register.filter
def field_label(form, name) -> str:
    """A form field's label for an error line; the form's own errors get none."""
    if name == "__all__":
        return ""
    field = form.fields.get(name) if hasattr(form, "fields") else None
    # A field without its own label is shown labelled as Django names it ("Observation"): the error says the same.
    return str(field.label) if field is not None and field.label else pretty_name(str(name))
