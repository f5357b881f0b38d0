"""The ingest request bodies as the OpenAPI schema documents them: contract v1, with the console's bounds.

Built from `ingest/contract.py`'s own constants and patterns, so the schema
cannot promise what the validator refuses. Two things JSON Schema cannot say
are in the descriptions instead: `config` and `detail` nest at most 64 levels
and hold no NUL character, and a non-finite value is written as the strings
"NaN", "Infinity", "-Infinity" (a number beyond the 64-bit float range is refused).
"""
from ingest.contract import (
    COMPONENT_RE,
    CONDITIONS,
    LAYERS,
    MAX_CONFIG_BYTES,
    MAX_DETAIL_BYTES,
    MAX_ITEMS,
    MAX_JSON_DEPTH,
    MAX_PHASES,
    MAX_STEP,
    MAX_TAG_KEY,
    MAX_TAGS,
    MAX_TIME,
    METRIC_RE,
    RUN_ID_RE,
)

NO_NUL = "^[^\\u0000]*$"


def _pattern(regex):
    return f"^{regex.pattern}$"


def _text(limit, minimum=0):
    return {"type": "string", "minLength": minimum, "maxLength": limit, "pattern": NO_NUL}


STEP = {"type": "integer", "minimum": 0, "maximum": MAX_STEP}
TIME = {"type": "number", "minimum": 0, "maximum": MAX_TIME, "description": "Unix seconds, up to 2200-01-01"}
FREE_FORM = f"any JSON object, nested at most {MAX_JSON_DEPTH} levels from the top of the document, without NUL characters"

RUN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id"],
    "properties": {
        "id": {"type": "string", "pattern": _pattern(RUN_ID_RE)},
        "name": _text(256),
        "code_rev": _text(128),
        "data_snapshot": _text(256),
        "config": {"type": "object", "description": f"{FREE_FORM}; at most {MAX_CONFIG_BYTES} bytes as JSON"},
        "budget": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "steps": {"type": "integer", "minimum": 1, "maximum": MAX_STEP},
                "gpu_hours": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1.7976931348623157e308},
                "deadline": {"type": "string", "format": "date-time", "description": "RFC 3339, with a zone"},
            },
        },
        "tags": {
            "type": "object",
            "maxProperties": MAX_TAGS,
            "additionalProperties": _text(256),
            "description": f"at most {MAX_TAGS} tags; names of at most {MAX_TAG_KEY} characters, without NUL",
        },
    },
}
VALUE = {
    "oneOf": [
        {"type": "number", "minimum": -1.7976931348623157e308, "maximum": 1.7976931348623157e308},
        {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]},
    ],
    "description": 'a number, or "NaN", "Infinity", "-Infinity" for a non-finite value',
}
PHASE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["step", "phase"],
    "properties": {"step": STEP, "phase": _text(64, 1), "time": TIME},
}
POINT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["step", "metric", "value"],
    "properties": {
        "step": STEP,
        "metric": {"type": "string", "pattern": _pattern(METRIC_RE)},
        "value": VALUE,
        "component": {"type": "string", "pattern": _pattern(COMPONENT_RE)},
        "time": TIME,
        "layer": {"type": "string", "enum": list(LAYERS)},
    },
}
EVENT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["step", "component", "condition", "magnitude"],
    "properties": {
        "step": STEP,
        "component": {"type": "string", "pattern": _pattern(COMPONENT_RE)},
        "condition": {"type": "string", "enum": list(CONDITIONS)},
        "magnitude": {"type": "number", "minimum": -1.7976931348623157e308, "maximum": 1.7976931348623157e308},
        "time": TIME,
        "detail": {"type": "object", "description": f"{FREE_FORM}; at most {MAX_DETAIL_BYTES} bytes as JSON"},
    },
}
BATCH = {
    "type": "object",
    "additionalProperties": False,
    "required": ["run"],
    "description": f"One run's batch: at most {MAX_ITEMS} points and events together and {MAX_PHASES} phases, "
                   "at most 4 MiB (after any gzip Content-Encoding).",
    "properties": {
        "batch_id": _text(128, 1),
        "run": RUN,
        "phases": {"type": "array", "maxItems": MAX_PHASES, "items": PHASE},
        "points": {"type": "array", "maxItems": MAX_ITEMS, "items": POINT},
        "events": {"type": "array", "maxItems": MAX_ITEMS, "items": EVENT},
    },
}
NDJSON = {
    "type": "string",
    "format": "ndjson",
    "description": "One JSON object per line, each with a `type` (run, phase, point, event) and the fields of that "
                   "item; every line names the one run (`run`, or the run line's `id`). Errors name `lines[N]`, "
                   "counted from 1. A batch id may come in the `X-Batch-Id` header.",
}
