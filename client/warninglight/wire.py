"""The ingest contract v1 as the client writes it: validation and NDJSON lines.

Pure standard library. Everything here runs in the sender thread (or once, in
`watch()`), never in `log()`: the training thread only enqueues raw values.
The checks mirror the console's own (ingest/contract.py) so that a batch the
client sends is never refused for its content; what fails them is counted as
rejected and never leaves the process.
"""
from __future__ import annotations

import dataclasses
import json
import math
import operator
import re

MAX_ITEMS = 10_000  # points and events per request
MAX_BODY_BYTES = 4 * 1024 * 1024  # per request
BODY_TARGET_BYTES = 3 * 1024 * 1024  # the client stays well under the limit
MAX_STEP = 9_007_199_254_740_991
MAX_DETAIL_BYTES = 4096
# The console's bounds on the run object (ingest/contract.py): a run line over them would have
# every batch of the run refused, so the client drops or cuts what is over, and says so.
MAX_CONFIG_BYTES = 256 * 1024
MAX_TAGS = 256
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
FLOAT_MAX = 1.7976931348623157e308

RUN_ID_RE = re.compile(r"[A-Za-z0-9._:/-]{1,128}\Z")
METRIC_RE = re.compile(r"[A-Za-z0-9._/-]{1,128}\Z")
COMPONENT_RE = re.compile(r"[A-Za-z0-9._:/\[\]-]{1,256}\Z")
_RUN_ID_BAD_CHARS = re.compile(r"[^A-Za-z0-9._:/-]")

CONDITIONS = ("dead", "oscillating", "saturated", "stagnant", "exploding", "low_confidence", "lost_gradient", "unclassified")
PHASES = ("warmup", "steady", "lr_decay", "eval", "checkpoint", "data_refresh", "restart", "cooldown")

_NAME_CACHE_LIMIT = 100_000


class Rejected(Exception):
    """An item that breaks the contract; `kind` groups the warning (logged once per kind)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def sanitize_run_id(run_id) -> tuple[str, bool]:
    """A contract-valid run id, and whether it had to be changed."""
    text = str(run_id) if run_id is not None else ""
    if RUN_ID_RE.match(text):
        return text, False
    fixed = _RUN_ID_BAD_CHARS.sub("-", text)[:128]
    return (fixed or "run"), True


def as_step(step) -> int:
    kind = type(step)
    if kind is int:
        if 0 <= step <= MAX_STEP:
            return step
        raise Rejected("step", f"step must be an integer from 0 to {MAX_STEP}, got {step}")
    if kind is bool or step is None:
        raise Rejected("step", f"step must be an integer >= 0, got {step!r}")
    if isinstance(step, float):
        if math.isfinite(step) and step == int(step) and 0 <= step <= MAX_STEP:
            return int(step)
        raise Rejected("step", f"step must be a whole number >= 0, got {step!r}")
    try:
        value = operator.index(step)  # numpy integers, integer 0-d tensors
    except Exception:
        raise Rejected("step", f"step must be an integer >= 0, got {type(step).__name__}") from None
    if 0 <= value <= MAX_STEP:
        return value
    raise Rejected("step", f"step must be an integer from 0 to {MAX_STEP}, got {value}")


def as_float(value, what="value") -> float:
    kind = type(value)
    if kind is float:
        return value
    if kind is int:
        try:
            return float(value)
        except OverflowError:
            raise Rejected(what, f"{what} is too large for a 64-bit float") from None
    if value is None or isinstance(value, (str, bytes, bytearray)):
        raise Rejected(what, f"{what} must be a number, got {type(value).__name__}")
    try:
        # numpy scalars, 0-d tensors (a CUDA tensor synchronises here, in the sender thread)
        return float(value)
    except Exception as exc:
        raise Rejected(what, f"{what} must be a number, got {type(value).__name__} ({exc})") from None


def value_token(x: float) -> str:
    """A value as the contract writes it: a JSON number, or "NaN" / "Infinity" / "-Infinity"."""
    if x - x == 0:  # finite
        return repr(x)  # Python's float repr is valid JSON for finite values
    if x != x:
        return '"NaN"'
    return '"Infinity"' if x > 0 else '"-Infinity"'


class Names:
    """Metric and component names checked by regex once each, kept as their JSON text."""

    def __init__(self):
        self.metrics = {}
        self.components = {}

    def metric(self, name) -> str:
        encoded = self.metrics.get(name) if type(name) is str else None
        if encoded is not None:
            return encoded
        if type(name) is not str or not METRIC_RE.match(name):
            raise Rejected("metric", f"metric name {str(name)[:60]!r} must match {METRIC_RE.pattern[:-2]}")
        encoded = '"' + name + '"'  # the pattern admits no character that JSON escapes
        if len(self.metrics) < _NAME_CACHE_LIMIT:
            self.metrics[name] = encoded
        return encoded

    def component(self, name) -> str:
        encoded = self.components.get(name) if type(name) is str else None
        if encoded is not None:
            return encoded
        if type(name) is not str or not COMPONENT_RE.match(name):
            raise Rejected("component", f"component {str(name)[:60]!r} must be a string matching {COMPONENT_RE.pattern[:-2]}")
        encoded = '"' + name + '"'
        if len(self.components) < _NAME_CACHE_LIMIT:
            self.components[name] = encoded
        return encoded


class Encoder:
    """Turns queued items into NDJSON lines of one run (raises Rejected for bad ones)."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.run = json.dumps(run_id)
        self.names = Names()
        self._point_head = '{"type":"point","run":' + self.run + ',"step":'

    def point_token(self, step: int, metric, component, token: str, when) -> str:
        """A point line from a checked step and a value already written as the contract's token."""
        metric = self.names.metric(metric)
        if component is None:
            return f'{self._point_head}{step},"metric":{metric},"value":{token},"time":{when!r}}}'
        component = self.names.component(component)
        return f'{self._point_head}{step},"metric":{metric},"component":{component},"value":{token},"time":{when!r}}}'

    def phase(self, step, name, when) -> str:
        step = as_step(step)
        if type(name) is not str or not 1 <= len(name) <= 64 or "\x00" in name:
            raise Rejected("phase", f"a phase name must be a string of 1 to 64 characters, got {str(name)[:60]!r}")
        return json.dumps({"type": "phase", "run": self.run_id, "step": step, "phase": name, "time": when})

    def event(self, step, component, condition, magnitude, when, detail) -> str:
        step = as_step(step)
        self.names.component(component)
        if condition not in CONDITIONS:
            raise Rejected("condition", f"condition must be one of {', '.join(CONDITIONS)}, got {str(condition)[:60]!r}")
        magnitude = as_float(magnitude, "magnitude")
        extra = None
        if not math.isfinite(magnitude):
            # The contract's magnitude is a JSON number: a non-finite one is sent as ±float max,
            # with the real value kept in the event's detail.
            extra = "NaN" if magnitude != magnitude else ("Infinity" if magnitude > 0 else "-Infinity")
            magnitude = -FLOAT_MAX if magnitude < 0 else FLOAT_MAX
        obj = {"type": "event", "run": self.run_id, "step": step, "component": component,
               "condition": condition, "magnitude": magnitude, "time": when}
        if detail is not None or extra is not None:
            detail = jsonable(dict(detail) if isinstance(detail, dict) else ({} if detail is None else {"detail": detail}))
            if extra is not None:
                detail.setdefault("magnitude", extra)
            if len(json.dumps(detail)) > MAX_DETAIL_BYTES:
                raise Rejected("detail", f"an event's detail must be at most {MAX_DETAIL_BYTES} bytes as JSON")
            obj["detail"] = detail
        return json.dumps(obj)


def jsonable(obj, depth=0):
    """Free-form data (config, detail, tags) as plain JSON: non-finite floats as the contract's
    strings, numpy/torch scalars as numbers, anything else unknown as its str()."""
    if depth > 50:
        return str(obj)
    if obj is None or type(obj) in (bool, str, int):
        return obj.replace("\x00", "") if type(obj) is str else obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return float(obj)
        return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {str(k).replace("\x00", ""): jsonable(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in obj]
    if isinstance(obj, int):  # bool handled above; int subclasses such as enums
        return int(obj)
    item = getattr(obj, "item", None)  # numpy scalars, 0-d tensors
    if callable(item):
        try:
            return jsonable(item(), depth + 1)
        except Exception:
            pass
    return str(obj).replace("\x00", "")


def config_dict(config):
    """A config as a JSON object: dicts, dataclasses, argparse Namespaces, objects with to_dict()."""
    if config is None:
        return None
    if isinstance(config, dict):
        return jsonable(config)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return jsonable(dataclasses.asdict(config))
    to_dict = getattr(config, "to_dict", None)  # transformers' TrainingArguments, omegaconf-like objects
    if callable(to_dict):
        return jsonable(to_dict())
    if hasattr(config, "__dict__"):
        return jsonable({k: v for k, v in vars(config).items() if not k.startswith("_")})
    raise TypeError(f"config must be a dict (or a dataclass, Namespace, object with to_dict()), got {type(config).__name__}")


def _text(value, limit, what, problems):
    if value is None:
        return None
    text = str(value).replace("\x00", "")
    if len(text) > limit:
        problems.append(f"{what} is longer than {limit} characters; cut")
        text = text[:limit]
    return text


def run_object(run_id, *, name=None, code_rev=None, data_snapshot=None, config=None, budget=None, tags=None):
    """The run object of the contract; fields that cannot be sent are dropped. Returns (run, problems)."""
    problems = []
    run = {"id": run_id}
    for key, value, limit in (("name", name, 256), ("code_rev", code_rev, 128), ("data_snapshot", data_snapshot, 256)):
        text = _text(value, limit, key, problems)
        if text is not None:
            run[key] = text
    if config is not None:
        try:
            sent = config_dict(config)
            size = len(json.dumps(sent, separators=(",", ":")))
            if size > MAX_CONFIG_BYTES:
                problems.append(f"config not sent: {size} bytes as JSON, the console takes at most {MAX_CONFIG_BYTES}")
            else:
                run["config"] = sent
        except Exception as exc:
            problems.append(f"config not sent: {exc}")
    if tags is not None:
        if isinstance(tags, (list, tuple, set, frozenset)):
            tags = dict.fromkeys(tags, "")
        if isinstance(tags, dict):
            if len(tags) > MAX_TAGS:
                problems.append(f"{len(tags)} tags: only the first {MAX_TAGS} are sent")
            run["tags"] = {}
            for key, value in list(tags.items())[:MAX_TAGS]:
                key = _text(key, MAX_TAG_KEY, "a tag name", problems)
                run["tags"][key] = _text(value, MAX_TAG_VALUE, f"tag {key}", problems) or ""
        else:
            problems.append(f"tags not sent: must be a dict of strings, got {type(tags).__name__}")
    if budget is not None:
        if not isinstance(budget, dict):
            problems.append(f"budget not sent: must be a dict with steps, gpu_hours, deadline; got {type(budget).__name__}")
        else:
            clean = {}
            for key, value in budget.items():
                if (key == "steps" and not isinstance(value, bool) and isinstance(value, (int, float))
                        and math.isfinite(value) and value == int(value) and 1 <= value <= MAX_STEP):
                    clean["steps"] = int(value)
                elif key == "gpu_hours" and not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
                    clean["gpu_hours"] = float(value)
                elif key == "deadline" and _is_zoned_datetime(value):
                    clean["deadline"] = value if isinstance(value, str) else value.isoformat()
                else:
                    problems.append(f"budget.{key} not sent: {value!r} (steps: integer from 1 to {MAX_STEP}, gpu_hours: number > 0, deadline: RFC 3339 with a zone)")
            if clean:
                run["budget"] = clean
    return run, problems


def _is_zoned_datetime(value) -> bool:
    from datetime import datetime

    if isinstance(value, datetime):
        return value.tzinfo is not None
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
        except ValueError:
            return False
    return False


def run_line(run: dict) -> str:
    return json.dumps({"type": "run", **run}, separators=(",", ":"), allow_nan=False)
