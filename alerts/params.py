"""Each rule kind's `params`: names, types, ranges and defaults, in one place.

Model validation (and through it the REST API, the console form, the admin and
rules as code) calls `params_errors`; evaluation reads a rule's params through
`resolved`, so no value the validator refuses is ever judged with and each
default is written once. docs/alerting.md's table of params is `reference_table()`,
and the console form's "params by kind" is `describe_kind`.

The validator walks one level of the object and never echoes a whole value
back, so a hostile `params` costs at most one message per known key plus
`MAX_UNKNOWN_REPORTED` for unknown ones.
"""
import math
from dataclasses import dataclass
from typing import Callable

from ingest.contract import MAX_STEP

NUMBER, WHOLE, CHOICE, NAME = "number", "whole", "choice", "name"
# A band keeps 5 × window points of history per series and phase kind in RuleProgress.state, and
# each point is judged against `window` points: the bound keeps both to a size a batch can afford.
MAX_WINDOW = 10_000
MAX_SECONDS = 10**9  # about 31 years: beyond Python's timedelta arithmetic comfort, and beyond any real gap
MAX_NAME = 128  # ingest.models.Series.metric
MAX_EVALUATIONS = 1_000
MAX_UNKNOWN_REPORTED = 20
MAX_KEY_SHOWN = 64


class InvalidParams(ValueError):
    """A rule's stored params do not validate (a row saved before validation existed): it cannot be judged."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{path}: {message}" for path, message in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    meaning: str
    # None: unset unless given. A callable derives it from the other resolved params.
    default: object = None
    minimum: float | None = None
    maximum: float | None = None
    above_minimum: bool = False  # strictly greater than `minimum`
    choices: tuple = ()
    default_text: str = ""  # how docs/alerting.md and the form write a derived default
    label_text: str = ""  # the form's and the rule page's name for it, where the key read as words is not enough

    @property
    def label(self) -> str:
        """The param in words ("Min history"), for people; the key stays for JSON, the API and rules as code."""
        return self.label_text or (self.name[0].upper() + self.name[1:]).replace("_", " ")

    def expectation(self) -> str:
        if self.type == CHOICE:
            return "one of " + ", ".join(self.choices)
        if self.type == NAME:
            return f"a metric name (1 to {MAX_NAME} characters)"
        noun = "a whole number" if self.type == WHOLE else "a finite number"
        if self.minimum is None:
            return noun
        if self.maximum is None or self.above_minimum:
            at_most = "" if self.maximum is None else f", at most {_num(self.maximum)}"
            return f"{noun} {'>' if self.above_minimum else '≥'} {_num(self.minimum)}{at_most}"
        return f"{noun} from {_num(self.minimum)} to {_num(self.maximum)}"

    def error(self, value) -> str | None:
        """Why `value` is not acceptable for this param, or None."""
        wrong = f"{self.name} must be {self.expectation()}, not {_what(value)}"
        if self.type == CHOICE:
            return None if isinstance(value, str) and value in self.choices else wrong
        if self.type == NAME:
            return None if isinstance(value, str) and 0 < len(value) <= MAX_NAME else wrong
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return wrong
        try:
            as_float = float(value)
        except OverflowError:  # an integer beyond any double
            return wrong
        if not math.isfinite(as_float):
            return wrong
        if self.type == WHOLE and as_float != int(as_float):
            return wrong
        if self.minimum is not None and (value < self.minimum or (self.above_minimum and value == self.minimum)):
            return wrong
        if self.maximum is not None and value > self.maximum:
            return wrong
        return None

    def default_words(self) -> str:
        if self.default_text:
            return self.default_text
        if self.default is None:
            return "unset"
        return _num(self.default)


def _num(value) -> str:
    if value == MAX_STEP:
        return "2^53 − 1"  # the contract's largest step
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _what(value) -> str:
    """A short description of a refused value: its type, or the number itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, int) and abs(value) > 10**15:
        return "an integer that large"
    return repr(value)[:40]


STEPS = {"type": WHOLE, "minimum": 0, "maximum": MAX_STEP}
# Persistence in time, as well as in points: a stall of seconds fires, a dip of a few ms steps does not.
PERSISTENCE_SECONDS = Param(
    "persistence_seconds", NUMBER, "the condition must also have held this many seconds, by the points' own "
    "`time` (from the first held point to the current one), before the rule fires", default=0, minimum=0,
    maximum=MAX_SECONDS)

KIND_PARAMS: dict[str, tuple[Param, ...]] = {
    "nonfinite": (
        Param("count", WHOLE, "held once this many of the series' last `within` points are non-finite (a rate: the "
              "isolated overflows a loss scaler skips by design are not a fault, persistent skipping is)", default=1,
              minimum=1, maximum=MAX_EVALUATIONS),
        Param("within", WHOLE, "the points `count` is taken over; at least `count`", default=lambda p: p["count"],
              minimum=1, maximum=MAX_EVALUATIONS, default_text="count"),
    ),
    "threshold": (
        Param("above", NUMBER, "held while a value is above it"),
        Param("below", NUMBER, "held while a value is below it; with `above`, less than it"),
        Param("settle_steps", meaning="steps of each phase not judged", default=0, **STEPS),
        PERSISTENCE_SECONDS,
    ),
    "band": (
        Param("direction", CHOICE, "which side of the band is held", default="both", choices=("above", "below", "both")),
        Param("width", NUMBER, "half-width of the band, in robust σ", default=6.0, minimum=0, above_minimum=True),
        Param("window", WHOLE, "points of history the band is computed from", default=100, minimum=2, maximum=MAX_WINDOW),
        Param("min_history", WHOLE, "points of history before anything is judged; at most `window`", default=20,
              minimum=2, maximum=MAX_WINDOW),
        Param("rel_floor", NUMBER, "σ is at least this share of the level", default=0.005, minimum=0,
              label_text="Relative floor"),
        Param("settle_steps", meaning="first steps of each phase not judged", default=5, **STEPS),
        Param("restore_window", meaning="steps after a restart judged against the history before its checkpoint",
              default=50, **STEPS),
        Param("restore_tolerance", NUMBER, "tolerance after a restart, as a share of the level", default=0.25, minimum=0),
        Param("reference_window", meaning="steps either side pooled from reference runs", default=50, **STEPS),
        Param("adapt_after", WHOLE, "opt-in: points in a row outside the band after which the new level is taken "
              "as the baseline (unset: never; an excursion is judged against the band it left until it comes back, "
              "and a new normal is declared by a phase, a config change or a person)", minimum=1, maximum=MAX_STEP),
        Param("scale", CHOICE, "linear: level ± width × σ; ratio (positive metrics: rates, norms, losses, times): "
              "judged on log(value), the band a ratio to the level whose lower edge is never ≤ 0, and rel_floor "
              "the least σ in log units", default="linear", choices=("linear", "ratio")),
        Param("max_ratio", NUMBER, "ratio bands: the band's edges are at most this ratio above and below the level, "
              "so a noisy metric still has a band a large drop or rise crosses", minimum=1, above_minimum=True,
              default=lambda p: 4.0 if p["scale"] == "ratio" else None, default_text="4 for ratio bands"),
        Param("drift_ratio", NUMBER, "ratio bands: the band's edges are at most this ratio from the level a window "
              "earlier (the anchor), so a ramp or a compounding drift the trend would follow is held once it has "
              "carried the metric this far", minimum=1, above_minimum=True),
        Param("level_points", WHOLE, "also judge the level: held when the median of the series' last this many points "
              "stands beyond the median of the as many before them by more than `level_width` times the spread of "
              "their difference (σ × 1.25 × √2 / √points) and by at least `level_min`; an excursion then ends only "
              "when that median is back within `level_width` times its spread of the level it left (a lasting shift "
              "smaller than the points' noise is seen, and a noisy series' points wandering back into the band do "
              "not end it); at most `window` (unset: points only)", minimum=2, maximum=MAX_WINDOW),
        Param("level_width", NUMBER, "how many of its spreads a level must move (with level_points)", default=4.0,
              minimum=0, above_minimum=True),
        Param("level_min", NUMBER, "the least shift of the level that is held, as a share of it (with level_points)",
              default=0.0, minimum=0),
        Param("floor_share", NUMBER, "judged only while the last value before a point (before the excursion, during "
              "one) is at least this share of the highest value "
              "the series has had (a learning rate at the end of its schedule, already near zero, is not collapsing)",
              minimum=0, above_minimum=True, maximum=1),
        Param("per", NAME, label_text="Per metric", meaning="judge the value divided by this run-level metric as "
              "it stood at that step (its latest point at or before it, at most 1,000 steps before; update_ratio per unit of lr: what the optimizer did "
              "beyond what its schedule asked); points with none are not judged"),
        PERSISTENCE_SECONDS,
    ),
    "absence": (
        Param("missing_steps", meaning="held when more than this many steps are missing in a row", **STEPS),
        Param("seconds", NUMBER, "held when more than this many seconds pass between points", minimum=0,
              above_minimum=True, maximum=MAX_SECONDS),
        Param("behind_steps", meaning="held when the run's newest batch reaches more than this many steps past the "
              "series' last point while the series sends nothing (a component whose telemetry stopped while the run "
              "goes on: a dead worker), and more than 5 × the series' own step interval and twice the furthest it "
              "fell behind and caught up before (senders that run apart)", **STEPS),
    ),
    "event": (
        Param("min_magnitude", NUMBER, "events of a lower magnitude (or none) are ignored"),
    ),
    "divergence": (
        Param("training", NAME, "the training metric that keeps falling", default="loss", label_text="Training metric"),
        Param("evaluations", WHOLE, "K: evaluations in a row the validation metric rose at", default=3,
              minimum=1, maximum=MAX_EVALUATIONS),
        Param("min_rise", NUMBER, "the least relative rise over those evaluations", default=0.01, minimum=0),
        Param("fast_rise", NUMBER, "also held, before K rises, once the validation metric has risen at two "
              "evaluations in a row and stands this share above its lowest evaluation while the training metric "
              "fell over the same evaluations (unset: only the K rises)", minimum=0, above_minimum=True),
        Param("noise_z", NUMBER, label_text="Noise multiple", meaning="either way, the rise must also exceed this "
              "many times the evaluation's own noise (the spread of its evaluations around their local trend: second differences over the last 16), "
              "measured from the lowest running median of three evaluations; until 4 evaluations before the lowest "
              "tell the noise, the training metric's step-to-step spread stands in for it (an evaluation averages at "
              "least one batch), and without training points the shares are 4 times as large (0: the fixed shares "
              "alone, as before)",
              default=4.0, minimum=0),
    ),
    "reference": (
        Param("direction", CHOICE, "which side is held: above every reference run, below every one, or either",
              default="above", choices=("above", "below", "both")),
        Param("ratio", NUMBER, "held when the value is beyond this ratio of the reference runs' extreme at the same "
              "step (above: × their highest; below: ÷ their lowest)", default=1.1, minimum=1, above_minimum=True),
        Param("reference_window", meaning="steps either side of a step; each reference run's value there is the "
              "median of its finite points within them", default=50, **STEPS),
        Param("min_references", WHOLE, "reference runs that must have a value at the step for it to be judged",
              default=1, minimum=1, maximum=MAX_EVALUATIONS),
        Param("settle_steps", meaning="first steps of each phase not judged", default=5, **STEPS),
    ),
    "weight_jump": (
        Param("allowance", NUMBER, "held when a component's weight norm changed between two consecutive samples by "
              "more than this many times what its update_ratio allows (the sum over the steps between them), in log "
              "terms", default=3.0, minimum=0, above_minimum=True),
        Param("min_ratio", NUMBER, "changes of the weight norm by less than this ratio (either way) are never held",
              default=1.25, minimum=1, above_minimum=True),
        Param("width", NUMBER, "held beyond this many robust σ above the component's own history of per-step "
              "log ratios (without update_ratio)", default=10.0, minimum=0, above_minimum=True),
        Param("window", WHOLE, "ratios of history kept (without update_ratio)", default=100, minimum=2, maximum=MAX_WINDOW),
        Param("min_history", WHOLE, "ratios of history before anything is judged (without update_ratio); at "
              "most `window`", default=20, minimum=2, maximum=MAX_WINDOW),
    ),
}
# What a kind needs beyond each param on its own: (check over the valid params, the key the message goes on, message).
_TOGETHER: dict[str, tuple[tuple[Callable[[dict], bool], str, str], ...]] = {
    "threshold": (
        (lambda p: p.get("above") is not None or p.get("below") is not None, "above",
         "a threshold rule needs above, below or both"),
        (lambda p: p.get("above") is None or p.get("below") is None or p["below"] < p["above"], "below",
         "below must be less than above (a value is held outside [below, above])"),
    ),
    "band": (
        (lambda p: p["min_history"] <= p["window"], "min_history", "min_history must be at most window"),
        (lambda p: p["max_ratio"] is None or p["scale"] == "ratio", "max_ratio",
         'max_ratio applies to ratio bands only (scale "ratio")'),
        (lambda p: p["level_points"] is None or p["level_points"] <= p["window"], "level_points",
         "level_points must be at most window"),
        (lambda p: p["drift_ratio"] is None or p["scale"] == "ratio", "drift_ratio",
         'drift_ratio applies to ratio bands only (scale "ratio")'),
    ),
    "nonfinite": (
        (lambda p: p["count"] <= p["within"], "within", "within must be at least count"),
    ),
    "weight_jump": (
        (lambda p: p["min_history"] <= p["window"], "min_history", "min_history must be at most window"),
    ),
    "absence": (
        (lambda p: p.get("missing_steps") is not None or p.get("seconds") is not None
         or p.get("behind_steps") is not None, "missing_steps",
         "an absence rule needs missing_steps, seconds, behind_steps or a combination"),
    ),
}
NOTES = {
    "nonfinite": "held on a NaN or ±Infinity point (with `count`, once that many of the last `within` are); the "
                 "scope's `phases`, when given, are the phases judged.",
    "event": "the scope names the event conditions.",
    "divergence": "the scope names the validation metric.",
    "reference": "the scope names the metrics; the run is judged against the project's reference runs (runs marked "
                 "`reference`) at the same step, and nothing is held while the project has none.",
    "weight_jump": "the scope names the weight norm metric (weight_norm) and the components; update_ratio of the same "
                   "component is read where the job sends it.",
}


def params_errors(kind, params) -> dict[str, str]:
    """{"params.<key>": message} for every problem (or {"params": …} for the object as a whole); empty when valid.

    An unknown kind has no params to check: governance reports the kind.
    """
    if kind not in KIND_PARAMS:
        return {}
    if not isinstance(params, dict):
        return {"params": f"params must be a JSON object ({{}} for the kind's defaults), not {_what(params)}"}
    spec = {p.name: p for p in KIND_PARAMS[kind]}
    errors = {}
    unknown = [key for key in params if key not in spec]
    allowed = f"{kind} rules take {', '.join(spec)}" if spec else f"{kind} rules take no params"
    for key in unknown[:MAX_UNKNOWN_REPORTED]:
        shown = str(key) if len(str(key)) <= MAX_KEY_SHOWN else str(key)[:MAX_KEY_SHOWN] + "…"
        errors[f"params.{shown}"] = f"unknown parameter {shown!r}: {allowed}"
    if len(unknown) > MAX_UNKNOWN_REPORTED:
        errors["params"] = f"and {len(unknown) - MAX_UNKNOWN_REPORTED} more unknown parameters: {allowed}"
    for name, param in spec.items():
        if name in params:
            message = param.error(params[name])
            if message:
                errors[f"params.{name}"] = message
    if not any(key.startswith("params.") and key[7:] in spec for key in errors):
        values = _with_defaults(kind, params)
        for check, key, message in _TOGETHER.get(kind, ()):
            if not check(values):
                errors.setdefault(f"params.{key}", message)
    return errors


def _with_defaults(kind, params) -> dict:
    """The known params as given (whole numbers as int), defaults where absent, derived defaults last."""
    values = {}
    derived = []
    for param in KIND_PARAMS[kind]:
        if param.name in params:
            value = params[param.name]
            values[param.name] = int(value) if param.type == WHOLE else value
        elif callable(param.default):
            derived.append(param)
        else:
            values[param.name] = param.default
    for param in derived:
        values[param.name] = param.default(values)
    return values


def resolved(kind, params) -> dict:
    """Every param of the kind, as judged: given or default (None for an unset optional one).

    Raises InvalidParams when the params do not validate, so a rule stored before
    validation existed is refused here instead of failing deep in numpy.
    """
    errors = params_errors(kind, params)
    if errors:
        raise InvalidParams(errors)
    return _with_defaults(kind, params or {})


def default(kind, name):
    """A param's default, for code outside a rule (the charts' default band)."""
    return next(p.default for p in KIND_PARAMS[kind] if p.name == name)


def describe_kind(kind) -> str:
    """One line for the console form's "params by kind"."""
    parts = []
    for param in KIND_PARAMS[kind]:
        default_words = param.default_words()
        parts.append(f'"{param.name}" ({param.meaning}; {param.expectation()}'
                     f'{"" if default_words == "unset" else f"; default {default_words}"})')
    text = "; ".join(parts)
    note = NOTES.get(kind)
    if not parts:
        return note
    return f"{text}. {note[0].upper()}{note[1:]}" if note else f"{text}."


def reference_table() -> str:
    """docs/alerting.md's table of params: kind, param, what it means, allowed values, default."""
    lines = ["| kind | param | meaning | values | default |", "| --- | --- | --- | --- | --- |"]
    for kind, params in KIND_PARAMS.items():
        if not params:
            lines.append(f"| `{kind}` | — | {NOTES[kind]} | | |")
        for param in params:
            lines.append(f"| `{kind}` | `{param.name}` | {param.meaning} | {param.expectation()} | {param.default_words()} |")
    together = [message for checks in _TOGETHER.values() for _, _, message in checks]
    return "\n".join(lines) + "\n\nAnd together: " + "; ".join(together) + "."
