"""A run's or a project's alerts, incidents, events and decisions as JSON Lines: the API's and `export_jsonl`'s one code path.

One JSON object per line. Each starts with `type` (alert, incident, event, decision) and `project`, then the
record as the API writes it: an alert as `/api/v1/alerts/` with its `changes`, an incident as
`/api/v1/incidents/` with its `changes`, an event as `/api/v1/runs/<id>/events/` with its `id`, `run` and `at`,
a decision as the decision log's own export (`/api/v1/decisions/?format=jsonl`).

Types come in that order, each oldest first (alerts by fired_at, incidents by opened_at, events by the job's
time, decisions by at; ties by id), so two exports of unchanged data are byte for byte the same. Times are
ISO 8601, except an event's `time` (the Unix seconds the job sent; `at` is the same instant in ISO 8601).
Non-finite magnitudes are the contract's strings "NaN", "Infinity" and "-Infinity" (an event whose magnitude
was stored as NaN reads "NaN"): every line is valid JSON. `since` keeps the records that began at or after
it (fired, opened, happened, written).

Rows are read in chunks of CHUNK, each chunk's related rows prefetched with it: memory stays flat however
large the project. A client that reads slowly holds no database connection while it reads
(opsconsole/streaming.py): rows are read in segments at the database's pace into a temporary file and sent from
it, each segment a new query after the last row sent (by the type's order). So an export is not one snapshot:
a record written while it streams is in it if it sorts after the segment being read.
"""
from datetime import UTC, datetime

from django.db.models import Prefetch

from alerts.incidents import incident_as_dict
from alerts.models import Alert, AlertChange, Incident, IncidentChange
from alerts.wire import alert_as_dict, change_as_dict, incident_change_as_dict
from ingest.models import Event
from ingest.wire import event_as_dict
from opsconsole import streaming
from reviews.models import LogEntry
from reviews.wire import entry_as_dict

TYPES = ("alerts", "incidents", "events", "decisions")
TYPES_WORDS = f"types is a comma-separated list of {', '.join(TYPES)}"
# The API documents and checks `types` with this pattern: what matches it is exactly what parse_types accepts.
TYPES_PATTERN = rf"(?:{'|'.join(TYPES)})(?:,(?:{'|'.join(TYPES)}))*"
CHUNK = 500
SEGMENT = streaming.SEGMENT  # rows a query reads before its connection goes back


def _alert(alert) -> dict:
    return {"type": "alert", "project": alert.run.project.slug, **alert_as_dict(alert),
            "changes": [change_as_dict(c) for c in alert.changes.all()]}


def _incident(incident) -> dict:
    return {"type": "incident", "project": incident.run.project.slug, **incident_as_dict(incident, list(incident.alerts.all())),
            "changes": [incident_change_as_dict(c) for c in incident.changes.all()]}


def _event(event) -> dict:
    return {"type": "event", "project": event.run.project.slug, "id": event.pk, "run": event.run.run_id,
            **event_as_dict(event), "at": datetime.fromtimestamp(event.time, UTC)}


def _decision(entry) -> dict:
    return {"type": "decision", **entry_as_dict(entry)}


def _rows(kind, scope, since):
    """The queryset of one type: `scope` is {"run": run} or {"run__project": project}."""
    if kind == "alerts":
        rows = Alert.objects.filter(**scope).select_related("run__project", "rule").prefetch_related(
            Prefetch("changes", AlertChange.objects.select_related("by").order_by("id"))).order_by("fired_at", "id")
        return rows.filter(fired_at__gte=since) if since else rows
    if kind == "incidents":
        rows = Incident.objects.filter(**scope).select_related("run__project", "origin__rule").prefetch_related(
            Prefetch("alerts", Alert.objects.select_related("rule").order_by("id")),
            Prefetch("changes", IncidentChange.objects.select_related("by").order_by("id"))).order_by("opened_at", "id")
        return rows.filter(opened_at__gte=since) if since else rows
    if kind == "events":
        rows = Event.objects.filter(**scope).select_related("run__project").order_by("time", "id")
        return rows.filter(time__gte=since.timestamp()) if since else rows
    rows = LogEntry.objects.filter(**scope).select_related("project", "run", "author").prefetch_related("corrections")
    return (rows.filter(at__gte=since) if since else rows).order_by("at", "id")


AS_DICT = {"alerts": _alert, "incidents": _incident, "events": _event, "decisions": _decision}
# Each type's order is (this field, id): a segment starts after the (field, id) of the one before.
ORDER_FIELD = {"alerts": "fired_at", "incidents": "opened_at", "events": "time", "decisions": "at"}


def export_lines(scope: dict, types=TYPES, since: datetime | None = None):
    """The export's lines (bytes, each ending in a newline), read lazily: nothing is queried until iterated."""
    for kind in TYPES:
        if kind in types:
            yield from streaming.segmented_lines(_rows(kind, scope, since), ORDER_FIELD[kind], AS_DICT[kind],
                                                 chunk=CHUNK, segment=SEGMENT)


def parse_types(text: str) -> tuple[str, ...]:
    """`alerts,events` → ("alerts", "events"); ValueError naming what is unknown."""
    asked = text.split(",")
    unknown = [t for t in asked if t not in TYPES]
    if unknown:
        raise ValueError(f"unknown type {', '.join(repr(t) for t in unknown)}: {TYPES_WORDS}")
    return tuple(asked)
