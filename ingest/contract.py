"""Ingest contract v1: parse and validate a request body into a plain Batch.

One validator for both wire formats (a JSON batch and NDJSON lines). It is pure:
no database, no Django, so it is tested on its own and both the HTTP endpoint
and `import_jsonl` call it. Validation is hand-written rather than run through a
JSON Schema engine because it sits on the hot path (5,000-point batches must
validate in a few milliseconds); `tests/test_contract_validator.py` checks it
against the contract's own JSON Schema file.

Every problem found is reported with its path (`points[3].value`, or
`lines[7].value` for NDJSON, lines counted from 1 as an editor does); nothing is
stored unless the whole batch is valid. An error list stops growing at
MAX_ERRORS (the rest are counted), and every bound below is checked before the
work it bounds, so a hostile 4 MiB body costs a bounded amount of memory and time.
"""
from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from operator import attrgetter
from typing import Annotated, Literal

import msgspec
import numpy as np
import orjson

MAX_ITEMS = 10_000  # points and events per request
MAX_PHASES = 10_000  # phase entries per request
MAX_LINES = MAX_ITEMS + MAX_PHASES + 1  # non-blank NDJSON lines: every point, event and phase, and a run line
MAX_BODY_BYTES = 4 * 1024 * 1024  # after any Content-Encoding is undone
MAX_STEP = 9_007_199_254_740_991
MAX_DETAIL_BYTES = 4096
MAX_CONFIG_BYTES = 256 * 1024  # run.config as JSON
MAX_TAGS = 256
MAX_TAG_KEY = 128
# Unix seconds up to 2200-01-01: every time can become a date, and nothing legitimate is later.
MAX_TIME = 7_258_118_400
# Arrays/objects nested deeper than this anywhere in a JSON document (a request body, an NDJSON
# line) are refused: deep enough for any real config, shallow enough that nothing recurses out of stack.
MAX_JSON_DEPTH = 64
# An error list stops here; the response says how many more there were.
MAX_ERRORS = 100

PHASES = ("warmup", "steady", "lr_decay", "eval", "checkpoint", "data_refresh", "restart", "cooldown")
LAYERS = ("system", "data", "numerics", "optimization", "generalization")
CONDITIONS = ("dead", "oscillating", "saturated", "stagnant", "exploding", "low_confidence", "lost_gradient", "unclassified")

METRIC_LAYERS = {
    **dict.fromkeys(
        ("throughput", "tokens_per_s", "samples_per_s", "step_time", "gpu_util", "gpu_mem", "host_mem",
         "comm_time", "io_time", "checkpoint_time", "hw_errors"),
        "system",
    ),
    **dict.fromkeys(("data_wait", "batch_size", "seq_len", "dup_rate", "corrupt_records", "mask_rate", "label_rate"), "data"),
    **dict.fromkeys(
        ("grad_norm", "nonfinite_count", "loss_scale", "overflow", "underflow", "clip_fraction", "weight_norm",
         "act_norm", "act_max", "dead_fraction"),
        "numerics",
    ),
    **dict.fromkeys(("loss", "lr", "update_ratio", "grad_noise", "momentum_norm"), "optimization"),
    **dict.fromkeys(("val_loss", "val_acc"), "generalization"),
}

RUN_ID_RE = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
METRIC_RE = re.compile(r"[A-Za-z0-9._/-]{1,128}")
COMPONENT_RE = re.compile(r"[A-Za-z0-9._:/\[\]-]{1,256}")

NONFINITE_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

RUN_FIELDS = {"id", "name", "code_rev", "data_snapshot", "config", "budget", "tags"}
BATCH_FIELDS = {"batch_id", "run", "phases", "points", "events"}
PHASE_FIELDS = {"step", "phase", "time"}
POINT_FIELDS = {"step", "metric", "value", "component", "time", "layer"}
EVENT_FIELDS = {"step", "component", "condition", "magnitude", "time", "detail"}
BUDGET_FIELDS = {"steps", "gpu_hours", "deadline"}


def layer_for_metric(metric: str) -> str:
    """The layer a metric belongs to when a point does not say (contract's vocabulary)."""
    layer = METRIC_LAYERS.get(metric)
    if layer:
        return layer
    if metric.startswith("data/"):
        return "data"
    if metric.startswith(("eval/", "val/")):
        return "generalization"
    return "optimization"


def phase_kind(phase: str) -> str:
    """Phase names outside the vocabulary are kept as sent but count as `steady` for baselines."""
    return phase if phase in PHASES else "steady"


def error_body(errors, total=None) -> dict:
    """The API's error body: the first MAX_ERRORS errors, and `more_errors` when there were more."""
    shown = errors[:MAX_ERRORS]
    body = {"errors": shown}
    more = (len(errors) if total is None else total) - len(shown)
    if more > 0:
        body["more_errors"] = more
    return body


class ContractError(Exception):
    """The request breaks the contract: HTTP 400 with the errors found (at most MAX_ERRORS, and the total)."""

    status = 400

    def __init__(self, errors, total=None):
        super().__init__(errors[0]["message"] if errors else "invalid batch")
        self.errors = errors[:MAX_ERRORS]
        self.total = max(total or 0, len(errors))

    def body(self) -> dict:
        return error_body(self.errors, self.total)


class TooLarge(ContractError):
    """Over the contract's size limits: HTTP 413."""

    status = 413

    def __init__(self, message):
        super().__init__([{"path": "", "message": message}])


@dataclass
class Phase:
    step: int
    phase: str
    time: float | None
    # Points of this batch that came before the phase entry (NDJSON keeps the
    # sender's order; in a JSON batch every phase counts as coming first).
    position: int = 0


@dataclass
class Event:
    step: int
    component: str
    condition: str
    magnitude: float
    time: float | None
    detail: dict | None


class PointColumns(Sequence):
    """A JSON batch's points held as columns, as `common_batch` checked them: read as the list of point tuples.

    steps (int64) and values (float64) are arrays, times a float64 array with NaN where a point
    gave no time (a sent time is never NaN); metrics and components are lists ("" for the run).
    """

    __slots__ = ("steps", "metrics", "components", "values", "times")

    def __init__(self, steps, metrics, components, values, times):
        self.steps, self.metrics, self.components, self.values, self.times = steps, metrics, components, values, times

    def __len__(self):
        return len(self.metrics)

    def __iter__(self):
        times = [None if t != t else t for t in self.times.tolist()]
        return zip(self.steps.tolist(), self.metrics, self.components, self.values.tolist(), times, repeat(None))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(self)[index]
        when = float(self.times[index])
        return (int(self.steps[index]), self.metrics[index], self.components[index], float(self.values[index]),
                None if when != when else when, None)


@dataclass
class Batch:
    run: dict
    batch_id: str | None = None
    phases: list[Phase] = field(default_factory=list)
    # (step, metric, component or "", value, time or None, layer or None), in arrival order: a list of
    # tuples, or PointColumns, which reads the same
    points: Sequence[tuple] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.run["id"]

    def step_range(self) -> tuple[int | None, int | None]:
        """The lowest and highest step of the batch's points; (None, None) without points."""
        if not len(self.points):
            return None, None
        if isinstance(self.points, PointColumns):
            return int(self.points.steps.min()), int(self.points.steps.max())
        steps = [p[0] for p in self.points]
        return min(steps), max(steps)


class _Errors:
    """The errors of one request: the first MAX_ERRORS kept, every one counted."""

    def __init__(self):
        self.items = []
        self.count = 0

    def add(self, path, message):
        self.count += 1
        if self.count <= MAX_ERRORS:
            self.items.append({"path": path, "message": message})

    @property
    def full(self) -> bool:
        """Further errors are only counted: a caller on a hot loop may count without writing the message."""
        return self.count >= MAX_ERRORS

    def unknown(self, path, obj, allowed):
        for key in obj:
            if key not in allowed:
                self.add(_join(path, key), f"unknown field {_shown(key)!r}")

    def raise_if_any(self):
        if self.count:
            raise ContractError(self.items, self.count)


def _shown(key: str, limit=64) -> str:
    """A sender's key as an error quotes it: never more than `limit` characters of it."""
    return key if len(key) <= limit else key[:limit] + "…"


def _join(path, key) -> str:
    return f"{path}.{_shown(key)}" if path else _shown(key)


def _child(path, key, in_object) -> str:
    return _join(path, key) if in_object else f"{path}[{key}]"


class OutOfRange:
    """A JSON number literal beyond the 64-bit float range (1e400), as `loads` leaves it.

    One rule for every field: such a number is refused, naming the field, where an
    integer beyond the range (10**400) is refused too. A non-finite value is written
    as the string "NaN", "Infinity" or "-Infinity" (or Python's bare tokens) and is data.
    """

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


def _parse_float(text):
    number = float(text)
    return number if number - number == 0 else OutOfRange(text)


def _beyond_float_range(value) -> bool:
    return type(value) is OutOfRange or (type(value) is int and _finite_float(value) is None)


TOO_LARGE = "is too large for a 64-bit float (beyond ±1.8e308)"


def _describe(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, (int, float)):
        shown = repr(value)
        return f"the number {shown}" if len(shown) <= 40 else f"a number of {len(shown)} digits"
    if isinstance(value, OutOfRange):
        return f"the number {value.text[:40]} (beyond the 64-bit float range)"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _step(value, path, errors):
    kind = type(value)
    if kind is int:
        if 0 <= value <= MAX_STEP:
            return value
        errors.add(path, f"step must be an integer from 0 to {MAX_STEP}, got {value}")
        return None
    if kind is float:
        if math.isfinite(value) and value == int(value):
            if 0 <= value <= MAX_STEP:
                return int(value)
            errors.add(path, f"step must be an integer from 0 to {MAX_STEP}, got {value!r}")
        elif not math.isfinite(value):
            errors.add(path, f"step must be an integer ≥ 0, got {value!r} (a non-finite step has no place on the axis)")
        else:
            errors.add(path, f"step must be a whole number, got the fraction {value!r}")
        return None
    errors.add(path, f"step must be an integer ≥ 0, got {_describe(value)}")
    return None


def _value(value, path, errors):
    kind = type(value)
    if kind is float:
        return value
    if kind is int or kind is OutOfRange:
        number = _finite_float(value) if kind is int else None
        if number is None:
            errors.add(path, f'value {TOO_LARGE}; write a non-finite value as the string "Infinity" or "-Infinity"')
        return number
    if kind is str:
        parsed = NONFINITE_STRINGS.get(value)
        if parsed is not None:
            return parsed
        errors.add(path, f'value must be a number or one of "NaN", "Infinity", "-Infinity" (exact spelling), got {_describe(value)}')
        return None
    errors.add(path, f'value must be a number or one of "NaN", "Infinity", "-Infinity", got {_describe(value)}')
    return None


def _finite_float(value):
    """A JSON number as a finite float, or None (non-finite, or an integer beyond the float range)."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _time(value, path, errors):
    if type(value) in (int, float) and (when := _finite_float(value)) is not None and 0 <= when <= MAX_TIME:
        return when
    errors.add(path, f"time must be Unix seconds from 0 to {MAX_TIME} (the year 2200), got {_describe(value)}")
    return None


def _pattern(value, regex, path, errors, what, limit):
    if type(value) is str and regex.fullmatch(value):
        return value
    if type(value) is not str:
        errors.add(path, f"{what} must be a string, got {_describe(value)}")
    elif not value:
        errors.add(path, f"{what} must not be empty")
    elif len(value) > limit:
        errors.add(path, f"{what} is {len(value)} characters long; at most {limit} are allowed")
    else:
        errors.add(path, f"{what} {value[:60]!r} has characters outside {regex.pattern}")
    return None


def _string(value, path, errors, limit, minimum=0):
    if type(value) is not str:
        errors.add(path, f"must be a string, got {_describe(value)}")
    elif len(value) > limit:
        errors.add(path, f"is {len(value)} characters long; at most {limit} are allowed")
    elif len(value) < minimum:
        errors.add(path, "must not be empty")
    elif "\x00" in value:
        errors.add(path, "must not contain the NUL character (\\u0000)")
    else:
        return value
    return None


def storable_json(obj, path, errors, level=1):
    """Free-form JSON (config, detail, an API request body) as the database can hold it, in place.

    `level` is how deep `obj` sits in its document (the document itself is 1).
    Non-finite numbers (bare NaN/Infinity tokens) become the contract's strings
    "NaN", "Infinity", "-Infinity", as the API writes them everywhere; a NUL
    character in a key or string (PostgreSQL cannot store it), a number beyond
    the float range, and nesting deeper than MAX_JSON_DEPTH are errors.
    Iterative, so deep nesting cannot exhaust the stack.
    """
    kind = type(obj)
    if kind is not dict and kind is not list:
        if kind is str and "\x00" in obj:
            errors.add(path, "must not contain the NUL character (\\u0000)")
        elif _beyond_float_range(obj):
            errors.add(path, TOO_LARGE)
        return obj
    stack = [(obj, path, level)]
    while stack:
        container, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            errors.add(where, f"nested too deeply: at most {MAX_JSON_DEPTH} levels of arrays and objects in a JSON document")
            continue
        is_dict = type(container) is dict
        for key in list(container) if is_dict else range(len(container)):
            item = container[key]
            kind = type(item)
            if is_dict and "\x00" in key:
                errors.add(_join(where, key), "keys must not contain the NUL character (\\u0000)")
            if kind is float:
                if item - item != 0:
                    container[key] = "NaN" if item != item else ("Infinity" if item > 0 else "-Infinity")
            elif kind is str:
                if "\x00" in item:
                    errors.add(_child(where, key, is_dict), "must not contain the NUL character (\\u0000)")
            elif kind is dict or kind is list:
                stack.append((item, _child(where, key, is_dict), depth + 1))
            elif _beyond_float_range(item):
                errors.add(_child(where, key, is_dict), TOO_LARGE)
    return obj


def check_json_document(obj):
    """Any JSON request body of the API: storable, in range, within MAX_JSON_DEPTH; ContractError naming each path."""
    errors = _Errors()
    storable_json(obj, "", errors)
    errors.raise_if_any()
    return obj


def _json_size(obj) -> int:
    return len(json.dumps(obj))


def validate_run(obj, path, errors, level=2) -> dict | None:
    """The run object; `level` is its depth in the document (2 in a JSON batch, 1 as an NDJSON line)."""
    if type(obj) is not dict:
        errors.add(path, f"run must be an object, got {_describe(obj)}")
        return None
    errors.unknown(path, obj, RUN_FIELDS)
    run = {}
    if "id" not in obj:
        errors.add(f"{path}.id", "run.id is required")
    else:
        run["id"] = _pattern(obj["id"], RUN_ID_RE, f"{path}.id", errors, "run.id", 128)
    for key, limit in (("name", 256), ("code_rev", 128), ("data_snapshot", 256)):
        if key in obj:
            run[key] = _string(obj[key], f"{path}.{key}", errors, limit)
    if "config" in obj:
        run["config"] = _free_form(obj["config"], f"{path}.config", errors, level + 1, MAX_CONFIG_BYTES, "config")
    if "tags" in obj:
        run["tags"] = _tags(obj["tags"], f"{path}.tags", errors)
    if "budget" in obj:
        run["budget"] = _budget(obj["budget"], f"{path}.budget", errors)
    return run


def _free_form(obj, path, errors, level, limit, what):
    """config or detail: an object of any JSON, storable, at most `limit` bytes as JSON."""
    if type(obj) is not dict:
        errors.add(path, f"{what} must be an object, got {_describe(obj)}")
        return None
    before = errors.count
    storable_json(obj, path, errors, level)
    # Measured only once the walk found it storable: a number beyond the float range cannot be written.
    if errors.count == before and _json_size(obj) > limit:
        errors.add(path, f"{what} must be at most {limit} bytes as JSON")
    return obj


def _tags(tags, path, errors):
    if type(tags) is not dict:
        errors.add(path, f"tags must be an object of strings, got {_describe(tags)}")
        return None
    if len(tags) > MAX_TAGS:
        errors.add(path, f"a run has at most {MAX_TAGS} tags, got {len(tags)}")
        return None
    for key, tag in tags.items():
        at = _join(path, key)
        if "\x00" in key:
            errors.add(at, "tag names must not contain the NUL character (\\u0000)")
        elif len(key) > MAX_TAG_KEY:
            errors.add(at, f"tag names are at most {MAX_TAG_KEY} characters long, got {len(key)}")
        _string(tag, at, errors, 256)
    return tags


def _budget(obj, path, errors):
    if type(obj) is not dict:
        errors.add(path, f"budget must be an object, got {_describe(obj)}")
        return None
    errors.unknown(path, obj, BUDGET_FIELDS)
    if "steps" in obj:
        steps = obj["steps"]
        if type(steps) is float and math.isfinite(steps) and steps == int(steps):
            obj["steps"] = steps = int(steps)
        if not (type(steps) is int and 1 <= steps <= MAX_STEP):
            errors.add(f"{path}.steps", f"budget.steps must be an integer from 1 to {MAX_STEP}, got {_describe(steps)}")
    if "gpu_hours" in obj:
        hours = obj["gpu_hours"]
        if not (type(hours) in (int, float) and (_finite_float(hours) or 0) > 0):
            errors.add(f"{path}.gpu_hours", f"budget.gpu_hours must be a number > 0, got {_describe(hours)}")
    if "deadline" in obj:
        deadline = obj["deadline"]
        try:
            parsed = datetime.fromisoformat(deadline) if type(deadline) is str else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            errors.add(f"{path}.deadline", f"budget.deadline must be an RFC 3339 date-time with a zone, got {_describe(deadline)}")
    return obj


def validate_phase(obj, path, errors, position=0) -> Phase | None:
    if type(obj) is not dict:
        errors.add(path, f"a phase must be an object, got {_describe(obj)}")
        return None
    errors.unknown(path, obj, PHASE_FIELDS)
    before = errors.count
    step = _step(obj["step"], f"{path}.step", errors) if "step" in obj else errors.add(f"{path}.step", "step is required")
    name = _string(obj["phase"], f"{path}.phase", errors, 64, 1) if "phase" in obj else errors.add(f"{path}.phase", "phase is required")
    when = _time(obj["time"], f"{path}.time", errors) if "time" in obj else None
    if errors.count > before:
        return None
    return Phase(step=step, phase=name, time=when, position=position)


_FLOAT_EXACT_INT = 2**53
_NONFINITE = Literal["NaN", "Infinity", "-Infinity"]


class _CommonPoint(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The common well-formed point, as `fast_point` takes it; msgspec checks it in C while it parses.

    A component sent as "" fails its minimum length, so only a point without one reads as the run's
    (""); a time sent as null is not a float, so only a point without one reads as NaN. Anything that
    fails here (a layer, a null, a bare NaN token, a bool, a whole float step) is left to the full path.
    """

    step: Annotated[int, msgspec.Meta(ge=0, le=MAX_STEP)]
    metric: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    value: float | _NONFINITE
    component: Annotated[str, msgspec.Meta(min_length=1, max_length=256)] = ""
    time: Annotated[float, msgspec.Meta(ge=0, le=MAX_TIME)] = math.nan


class _CommonBatch(msgspec.Struct, forbid_unknown_fields=True):
    """A batch whose points are all common; the other members are kept as raw JSON for the usual checks."""

    run: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    batch_id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    phases: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    events: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    points: list[_CommonPoint] = []


_COMMON_BATCH = msgspec.json.Decoder(_CommonBatch)
_STEP, _METRIC, _VALUE, _COMPONENT, _TIME = (attrgetter(name) for name in ("step", "metric", "value", "component", "time"))


def common_batch(body: bytes) -> dict | None:
    """The batch as the document `loads` gives, its points already checked as PointColumns, when every
    point is the common well-formed kind; None sends the body down the full path.

    Parsing straight into small structs and reading them a column at a time makes a 5,000-point batch
    cost a few passes in C, without a dict a point. Whatever this refuses, the full path parses again
    and checks point by point, so every error is still named by its point, and a sender cannot tell
    which path took its batch (tests/test_contract_column_path.py).
    """
    try:
        parsed = _COMMON_BATCH.decode(body)
        obj = {name: orjson.loads(bytes(raw)) for name in ("run", "batch_id", "phases", "events")
               if (raw := getattr(parsed, name)) is not msgspec.UNSET}
    except (msgspec.DecodeError, orjson.JSONDecodeError, RecursionError):  # the full path names what is wrong
        return None
    points = parsed.points
    n = len(points)
    if not n:
        obj["points"] = []
        return obj
    metrics = list(map(_METRIC, points))
    components = list(map(_COMPONENT, points))
    # Names by their distinct values, each pattern matched once.
    if not all(METRIC_RE.fullmatch(m) for m in set(metrics)):
        return None
    parts = set(components)
    parts.discard("")
    if not all(COMPONENT_RE.fullmatch(c) for c in parts):
        return None
    steps = np.fromiter(map(_STEP, points), np.int64, n)
    # An integer value is already the float Python's float() makes of it (one beyond the float range failed
    # the parse); numpy reads the three spellings of the non-finite values as float() does.
    values = np.fromiter(map(_VALUE, points), np.float64, n)
    obj["points"] = PointColumns(steps, metrics, components, values, np.fromiter(map(_TIME, points), np.float64, n))
    return obj


def fast_point(obj, names):
    """The common, well-formed point in a few type checks; None sends it down the full path.

    `names` holds metric and component names that already passed their pattern
    in this request, so each distinct name is checked by regex once.
    """
    if type(obj) is not dict:
        return None
    step = obj.get("step")
    metric = obj.get("metric")
    value = obj.get("value")
    if type(step) is not int or not 0 <= step <= MAX_STEP or type(metric) is not str or metric not in names:
        return None
    kind = type(value)
    if kind is int and -_FLOAT_EXACT_INT <= value <= _FLOAT_EXACT_INT:
        value = float(value)
    elif kind is not float:
        return None
    size = len(obj)
    if size == 3:
        return (step, metric, "", value, None, None)
    component = obj.get("component")
    when = obj.get("time")
    expected = 3
    if component is not None:
        if type(component) is not str or ("component", component) not in names:
            return None
        expected += 1
    if when is not None:
        if type(when) is float:
            if not 0 <= when <= MAX_TIME:
                return None
        elif type(when) is not int or not 0 <= when <= MAX_TIME:
            return None
        when = float(when)
        expected += 1
    if size != expected:
        return None
    return (step, metric, component or "", value, when, None)


def validate_point(obj, path, errors, metric_cache):
    if type(obj) is not dict:
        errors.add(path, f"a point must be an object, got {_describe(obj)}")
        return None
    before = errors.count
    if len(obj) > 3 or "step" not in obj or "metric" not in obj or "value" not in obj:
        errors.unknown(path, obj, POINT_FIELDS)
        for key in ("step", "metric", "value"):
            if key not in obj:
                errors.add(f"{path}.{key}", f"{key} is required")
    step = _step(obj["step"], f"{path}.step", errors) if "step" in obj else None
    metric = obj.get("metric")
    if "metric" in obj and not (type(metric) is str and metric in metric_cache):
        if _pattern(metric, METRIC_RE, f"{path}.metric", errors, "metric", 128) is not None:
            metric_cache.add(metric)
    value = _value(obj["value"], f"{path}.value", errors) if "value" in obj else None
    component = ""
    if "component" in obj:
        component = _pattern(obj["component"], COMPONENT_RE, f"{path}.component", errors, "component", 256)
        if component is not None:
            metric_cache.add(("component", component))
    when = _time(obj["time"], f"{path}.time", errors) if "time" in obj else None
    layer = obj.get("layer")
    if layer is not None and layer not in LAYERS:
        errors.add(f"{path}.layer", f"layer must be one of {', '.join(LAYERS)}, got {_describe(layer)}")
    elif "layer" in obj and layer is None:
        errors.add(f"{path}.layer", f"layer must be one of {', '.join(LAYERS)}, got null")
    if errors.count > before:
        return None
    return (step, metric, component, value, when, layer)


def validate_event(obj, path, errors, level=3) -> Event | None:
    """An event; `level` is its depth in the document (3 in a JSON batch, 1 as an NDJSON line)."""
    if type(obj) is not dict:
        errors.add(path, f"an event must be an object, got {_describe(obj)}")
        return None
    errors.unknown(path, obj, EVENT_FIELDS)
    before = errors.count
    for key in ("step", "component", "condition", "magnitude"):
        if key not in obj:
            errors.add(f"{path}.{key}", f"{key} is required")
    step = _step(obj["step"], f"{path}.step", errors) if "step" in obj else None
    component = _pattern(obj["component"], COMPONENT_RE, f"{path}.component", errors, "component", 256) if "component" in obj else None
    condition = obj.get("condition")
    if "condition" in obj and condition not in CONDITIONS:
        errors.add(f"{path}.condition", f"condition must be one of {', '.join(CONDITIONS)}, got {_describe(condition)}")
    magnitude = obj.get("magnitude")
    if "magnitude" in obj:
        if _beyond_float_range(magnitude):
            errors.add(f"{path}.magnitude", f"magnitude {TOO_LARGE}")
        elif type(magnitude) is int:
            magnitude = float(magnitude)
        elif type(magnitude) is not float:
            errors.add(f"{path}.magnitude", f"magnitude must be a number, got {_describe(magnitude)}")
    when = _time(obj["time"], f"{path}.time", errors) if "time" in obj else None
    detail = obj.get("detail")
    if "detail" in obj:
        detail = _free_form(detail, f"{path}.detail", errors, level + 1, MAX_DETAIL_BYTES, "detail")
    if errors.count > before:
        return None
    return Event(step=step, component=component, condition=condition, magnitude=magnitude, time=when, detail=detail)


def _refuse_constant(token):
    raise ValueError(f"{token} is not JSON")


# Built once: json.loads with keyword arguments builds a decoder on every call.
_DECODERS = {
    True: json.JSONDecoder(parse_float=_parse_float),
    False: json.JSONDecoder(parse_float=_parse_float, parse_constant=_refuse_constant),
}


def parse_json(text: bytes, nonfinite_tokens=True, describe=True):
    """One JSON document as (document, None), or (None, what is wrong with it).

    With `nonfinite_tokens` (the ingest contract) the bare NaN/Infinity/-Infinity
    tokens that Python's json writes are accepted as those values. A number
    literal beyond the float range is left as an `OutOfRange` for the field's
    check to refuse by name; orjson refuses it (and nesting past 1,024 levels)
    itself, so only the rare document it refuses takes the slower standard parser
    (whose messages the API gives). Without `describe` a document that parser
    could not rescue is refused at once, with no message.
    """
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError as exc:
        rescuable = str(exc).startswith("number is infinity") or (nonfinite_tokens and (b"NaN" in text or b"Infinity" in text))
        if not (describe or rescuable):
            return None, ""
    try:
        obj = _DECODERS[nonfinite_tokens].decode(text.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        return None, f"body is not UTF-8: {exc.reason} at byte {exc.start}"
    except json.JSONDecodeError as exc:
        return None, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return None, f"malformed JSON: nested too deeply (at most {MAX_JSON_DEPTH} levels of arrays and objects)"
    except ValueError as exc:  # a refused NaN token, or an integer literal of more than 4,300 digits
        return None, "malformed JSON: " + (str(exc) if str(exc).endswith("is not JSON") else "a number has more than 4300 digits")
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(obj):
        return None, "malformed JSON: a string holds an unpaired surrogate escape (such as \\ud800); strings must be valid Unicode"
    return obj, None


def loads(text: bytes, *, nonfinite_tokens=True):
    """One JSON document (see parse_json), or ContractError saying what is wrong with it."""
    obj, problem = parse_json(text, nonfinite_tokens)
    if problem is not None:
        raise ContractError([{"path": "", "message": problem}])
    return obj


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(obj) -> bool:
    """Python's json (unlike orjson) lets "\\ud800" through, and no database can store it."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif type(item) is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def check_body_size(size: int):
    if size > MAX_BODY_BYTES:
        raise TooLarge(f"body is {size} bytes; at most {MAX_BODY_BYTES} bytes (4 MiB) per request — split the batch")


def _check_item_count(count: int, phases: int = 0):
    if count > MAX_ITEMS:
        raise TooLarge(f"batch has {count} points and events; at most {MAX_ITEMS} per request — split the batch")
    if phases > MAX_PHASES:
        raise TooLarge(f"batch has {phases} phases; at most {MAX_PHASES} per request — split the batch")


def _length(items) -> int:
    return len(items) if type(items) in (list, PointColumns) else 0


def parse_json_batch(body: bytes) -> Batch:
    check_body_size(len(body))
    if not body.strip():
        raise ContractError([{"path": "", "message": "empty body: send a JSON object with at least run.id"}])
    obj = common_batch(body) or loads(body)
    if type(obj) is not dict:
        raise ContractError([{"path": "", "message": f"the body must be a JSON object, got {_describe(obj)}"}])
    points = obj.get("points", [])
    events = obj.get("events", [])
    _check_item_count(_length(points) + _length(events), _length(obj.get("phases")))

    errors = _Errors()
    errors.unknown("", obj, BATCH_FIELDS)
    batch_id = None
    if "batch_id" in obj:
        batch_id = _string(obj["batch_id"], "batch_id", errors, 128, 1)
    if "run" not in obj:
        errors.add("run", "run is required (an object with at least run.id)")
        run = None
    else:
        run = validate_run(obj["run"], "run", errors)

    phases, parsed_points, parsed_events = [], [], []
    for name, items in (("phases", obj.get("phases", [])), ("points", points), ("events", events)):
        if type(items) not in (list, PointColumns):
            errors.add(name, f"{name} must be an array, got {_describe(items)}")
    if type(obj.get("phases", [])) is list:
        for i, item in enumerate(obj.get("phases", [])):
            phases.append(validate_phase(item, f"phases[{i}]", errors))
    if type(points) is PointColumns:
        parsed_points = points
    elif type(points) is list:
        metric_cache = set()
        append = parsed_points.append
        for i, item in enumerate(points):
            append(fast_point(item, metric_cache) or validate_point(item, f"points[{i}]", errors, metric_cache))
    if type(events) is list:
        for i, item in enumerate(events):
            parsed_events.append(validate_event(item, f"events[{i}]", errors))
    errors.raise_if_any()
    return Batch(run=run, batch_id=batch_id, phases=phases, points=parsed_points, events=parsed_events)


NDJSON_TYPES = ("run", "phase", "point", "event")
_LINE_PATH = re.compile(r"lines\[(\d+)\]")
_BLANK_LINE = re.compile(rb"^[ \t\r\f\v]*$", re.MULTILINE)


def _check_line_count(body: bytes):
    """More lines than a request can hold is a 413 before any is parsed: time stays bounded by MAX_LINES."""
    lines = body.count(b"\n") + 1 - _BLANK_LINE.subn(b"", body)[1]
    if lines > MAX_LINES:
        raise TooLarge(f"body has {lines} lines; at most {MAX_LINES} per request ({MAX_ITEMS} points and events, "
                       f"{MAX_PHASES} phases and a run line) — split the batch")


def parse_ndjson(body: bytes, batch_id: str | None = None) -> Batch:
    """NDJSON: one object per line, each with a `type`; all lines of one request name one run."""
    check_body_size(len(body))
    if not body.strip():
        raise ContractError([{"path": "", "message": "empty body: send at least one NDJSON line"}])
    _check_line_count(body)
    errors = _Errors()
    if batch_id is not None and len(batch_id) > 128:
        errors.add("X-Batch-Id", f"batch id is longer than 128 characters ({len(batch_id)})")
    elif batch_id is not None:
        batch_id = _string(batch_id, "X-Batch-Id", errors, 128, 1)
    run = None
    run_id = None
    phases, points, events = [], [], []
    metric_cache = set()
    items = phase_count = 0
    # One line at a time (never a list of every line): a body of 2 million tiny lines stays small.
    for number, raw in enumerate(io.BytesIO(body), start=1):
        if not raw.strip():
            continue
        path = f"lines[{number}]"
        obj, problem = parse_json(raw, describe=not errors.full)
        if problem is not None or type(obj) is not dict:
            if errors.full:  # two million bad lines: count them, describe the first hundred
                errors.count += 1
            else:
                errors.add(path, f"line {number}: {problem or 'each line must be a JSON object, got ' + _describe(obj)}")
            continue
        kind = obj.get("type")
        if kind not in NDJSON_TYPES:
            errors.add(f"{path}.type", f"line {number}: type must be one of {', '.join(NDJSON_TYPES)}, got {_describe(kind)}")
            continue
        items += kind == "point" or kind == "event"
        phase_count += kind == "phase"
        if items > MAX_ITEMS or phase_count > MAX_PHASES:
            continue  # refused with 413 below, whatever else is wrong: only count the rest
        body_obj = {k: v for k, v in obj.items() if k != "type"}
        if kind == "run":
            parsed = validate_run(body_obj, path, errors, level=1)
            if parsed and parsed.get("id"):
                if run is not None:
                    errors.add(f"{path}", f"line {number}: a second run line; one request carries one run")
                run = parsed
                line_run = parsed["id"]
            else:
                continue
        else:
            line_run = body_obj.pop("run", None)
            if line_run is None:
                errors.add(f"{path}.run", f"line {number}: run (the run id) is required on every {kind} line")
            elif _pattern(line_run, RUN_ID_RE, f"{path}.run", errors, "run", 128) is None:
                line_run = None
            if kind == "point":
                points.append(fast_point(body_obj, metric_cache) or validate_point(body_obj, path, errors, metric_cache))
            elif kind == "event":
                events.append(validate_event(body_obj, path, errors, level=1))
            else:
                phases.append(validate_phase(body_obj, path, errors, position=len(points)))
        if line_run is not None:
            if run_id is None:
                run_id = line_run
            elif line_run != run_id:
                errors.add(f"{path}.run", f"line {number}: names run {line_run!r} but this request is for {run_id!r}; send one run per request")
    _check_item_count(items, phase_count)
    if run_id is None and not errors.count:
        errors.add("lines", "no line names a run: add a run line or a run field")
    for error in errors.items:
        # Field checks shared with the JSON form name the path only; say the line in words too.
        number = _LINE_PATH.match(error["path"])
        if number and not error["message"].startswith(f"line {number[1]}:"):
            error["message"] = f"line {number[1]}: {error['message']}"
    errors.raise_if_any()
    if run is None:
        run = {"id": run_id}
    return Batch(run=run, batch_id=batch_id, phases=phases, points=points, events=events)
