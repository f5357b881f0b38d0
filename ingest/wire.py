"""A stored value in the contract's wire form, for every API that answers with values."""
import math

from ingest.storage import from_db_float


def wire_value(value: float):
    """Non-finite values travel as the strings "NaN", "Infinity" and "-Infinity" (contract v1)."""
    if math.isfinite(value):
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def event_as_dict(event) -> dict:
    """A health event as the events API and the JSONL export write it."""
    return {
        "step": event.step,
        "component": event.component,
        "condition": event.condition,
        "magnitude": wire_value(from_db_float(event.magnitude)),
        "time": event.time,
        "detail": event.detail,
        "attempt": event.attempt,
        "source": event.source,
        "fingerprint": event.fingerprint or None,
        "ended_at": event.ended_at,
    }
