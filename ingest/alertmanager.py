"""Prometheus Alertmanager webhook (payload version 4): each alert becomes a system-layer event of a run.

Labels read: `run` names the run (none: the project's catch-all `<slug>/unassigned`); `component`,
else `instance` and `gpu` together (`node3:9400/gpu5`), else either, else `alertname`, names the
component; `condition` (the contract's vocabulary, else `unclassified`); `step` (else the run's
latest step). The `value` annotation (else a `magnitude` label) is the magnitude, 1 when neither
is a number. One event per incident, keyed by (fingerprint, startsAt): repeats change nothing; a
resolved notification ends the open event and records the receipt that ended it, and evaluation
(alerts/evaluation.py) ends the alerts that no open event of theirs holds any longer.

Alertmanager takes any 4xx as final and drops the whole notification, so one bad alert must never
cost the others: each alert is stored, moved to the catch-all (a run label that cannot be used), or
put aside (not Alertmanager's shape), and the answer names each with its path. Only a body that is
not a notification at all, or is over the contract's limits, is refused.
"""
from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

import orjson
from django.db import connection, transaction
from django.utils import timezone

from ingest.contract import COMPONENT_RE, CONDITIONS, MAX_ITEMS, MAX_STEP, RUN_ID_RE, Batch, ContractError, OutOfRange, check_body_size, loads
from ingest.models import BatchReceipt, Condition, Event, EventSource, Layer, Run
from ingest.service import RunOfAnotherProject, locked_run
from ingest.signals import announce_batch_stored
from ingest.storage import db_float
from ingest.wire import wire_value

# PostgreSQL cannot store NUL in text or jsonb; the replacement character keeps the rest of the text,
# and is the same on every notification, so a resolved alert still finds the event it ends.
NUL, REPLACEMENT = "\x00", "\ufffd"
STEP_LABEL_RE = re.compile(r"[0-9]{1,16}")
# Checked before datetime.fromisoformat, which takes more than RFC 3339 and stops reading at a NUL.
RFC3339_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})")


class TooManyAlerts(ContractError):
    status = 413


class _PutAside(Exception):
    """The alert is not in Alertmanager's shape at `path`: it is not stored."""

    def __init__(self, path, message):
        super().__init__(message)
        self.path, self.message = path, message


@dataclass
class AlertmanagerAlert:
    index: int
    status: str
    run_id: str
    component: str
    condition: str
    magnitude: float
    step: int | None
    starts_at: float | None
    ends_at: float | None
    fingerprint: str
    detail: dict
    # Labels that could not be used as sent: (path, message); the alert is stored all the same.
    notes: list = field(default_factory=list)

    def note(self, path, message):
        self.notes.append((path, message))
        self.detail.setdefault("put_aside", []).append(message)


@dataclass
class Notification:
    alerts: list[AlertmanagerAlert]
    rejected: list[tuple[int, str, str]]  # (index, path, message): alerts put aside, not stored

    def put_aside(self) -> list[dict]:
        """What was not used as sent, per alert path, in alert order; `stored_on` is the run, or null when not stored."""
        notes = [(i, {"path": path, "message": message, "stored_on": None}) for i, path, message in self.rejected]
        for alert in self.alerts:
            notes += [(alert.index, {"path": path, "message": message, "stored_on": alert.run_id}) for path, message in alert.notes]
        return [note for _, note in sorted(notes, key=lambda n: n[0])]


def _text(value):
    """A label or annotation value as the text Alertmanager would have sent; None when it cannot be text."""
    kind = type(value)
    if kind is str:
        return value.replace(NUL, REPLACEMENT)
    if kind is bool:
        return "true" if value else "false"
    if kind is float:
        return str(wire_value(value))  # bare NaN, 1e400 → "NaN", "Infinity"
    if kind is int:
        return str(value)
    if kind is OutOfRange:  # a literal beyond the float range (1e400), as the contract's parser leaves it
        return "-Infinity" if value.text.lstrip().startswith("-") else "Infinity"
    if value is None:
        return ""
    return None


def _text_map(obj, path) -> dict:
    """Labels or annotations: Alertmanager sends an object of strings."""
    if obj is None:
        return {}
    if type(obj) is not dict:
        raise _PutAside(path, f"{path.rsplit('.', 1)[-1]} must be an object of text values")
    texts = {}
    for key, value in obj.items():
        key = key.replace(NUL, REPLACEMENT)
        text = _text(value)
        if text is None:
            # Not flattened: an object nested a thousand deep cannot even be written back as text safely.
            raise _PutAside(f"{path}.{key}", f"values must be text (Alertmanager's labels and annotations are strings), "
                                             f"got {'an object' if type(value) is dict else 'an array'}")
        texts[key] = text
    return texts


def _timestamp(value, path):
    if value is None or value == "" or (type(value) is str and value.startswith("0001-01-01T00:00:00")):
        return None  # Go's zero time: Alertmanager's "unset"
    parsed = None
    if type(value) is str and RFC3339_RE.fullmatch(value):
        try:
            parsed = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        except ValueError:
            pass  # a 13th month, a 25th hour
    if parsed is None:
        shown = f", got {value[:60]!r}" if type(value) is str else ""
        raise _PutAside(path, f"must be an RFC 3339 time{shown}")
    return parsed.timestamp()


def _component(labels) -> str:
    gpu = labels.get("gpu", "")
    if gpu.isascii() and gpu.isdigit():
        gpu = f"gpu{gpu}"  # DCGM's gpu="5"
    name = labels.get("component") or "/".join(p for p in (labels.get("instance", ""), gpu) if p)
    name = (name or labels.get("alertname") or "unknown")[:256]
    return "".join(c if COMPONENT_RE.fullmatch(c) else "_" for c in name)


def _magnitude(labels, annotations) -> float:
    raw = annotations.get("value", labels.get("magnitude"))
    try:
        return float(raw)  # "NaN" and "+Inf" are data, as everywhere in the contract
    except (TypeError, ValueError):
        return 1.0


def _fingerprint(value, labels, path) -> str:
    if value is None or value == "":
        # Alertmanager always sends one (a hash of the labels); other senders get the same idea.
        return hashlib.sha256(orjson.dumps(labels, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    if type(value) is not str:
        raise _PutAside(path, "fingerprint must be text")
    return value.replace(NUL, REPLACEMENT)[:64]


def _parse_alert(alert, index, catch_all) -> AlertmanagerAlert:
    path = f"alerts[{index}]"
    if type(alert) is not dict:
        raise _PutAside(path, "an alert must be an object")
    status = alert.get("status")
    if status not in ("firing", "resolved"):
        raise _PutAside(f"{path}.status", 'status must be "firing" or "resolved"')
    labels = _text_map(alert.get("labels"), f"{path}.labels")
    annotations = _text_map(alert.get("annotations"), f"{path}.annotations")
    url = alert.get("generatorURL")
    if url is not None and type(url) is not str:
        raise _PutAside(f"{path}.generatorURL", "generatorURL must be text")
    parsed = AlertmanagerAlert(
        index=index,
        status=status,
        run_id=catch_all,
        component=_component(labels),
        condition=labels.get("condition") if labels.get("condition") in CONDITIONS else Condition.UNCLASSIFIED,
        magnitude=_magnitude(labels, annotations),
        step=None,
        starts_at=_timestamp(alert.get("startsAt"), f"{path}.startsAt"),
        ends_at=_timestamp(alert.get("endsAt"), f"{path}.endsAt"),
        fingerprint=_fingerprint(alert.get("fingerprint"), labels, f"{path}.fingerprint"),
        detail={"labels": labels, "annotations": annotations,
                "generatorURL": url.replace(NUL, REPLACEMENT) if url is not None else None},
    )
    run = labels.get("run", "")
    if RUN_ID_RE.fullmatch(run):
        parsed.run_id = run
    elif run:
        parsed.note(f"{path}.labels.run", f"run label {run[:60]!r} is not a run id ({RUN_ID_RE.pattern}): "
                                          "the alert is kept on the project's catch-all run")
    step = labels.get("step", "")
    if STEP_LABEL_RE.fullmatch(step) and int(step) <= MAX_STEP:
        parsed.step = int(step)
    elif step:
        parsed.note(f"{path}.labels.step", f"step label {step[:60]!r} is not an integer from 0 to {MAX_STEP}: "
                                           "the event is placed at the run's latest step")
    return parsed


def parse_webhook(body: bytes, catch_all: str) -> Notification:
    """The notification's alerts, each parsed on its own; ContractError only for a body that is not a notification."""
    check_body_size(len(body))
    if not body.strip():
        raise ContractError([{"path": "", "message": "empty body: send Alertmanager's webhook JSON"}])
    payload = loads(body)
    if type(payload) is not dict:
        raise ContractError([{"path": "", "message": "the body must be a JSON object (Alertmanager's webhook payload)"}])
    errors = []
    if payload.get("version") != "4":
        errors.append({"path": "version", "message": 'only webhook payload version "4" is understood'})
    alerts = payload.get("alerts")
    if type(alerts) is not list:
        errors.append({"path": "alerts", "message": "alerts must be an array"})
    if errors:
        raise ContractError(errors)
    if len(alerts) > MAX_ITEMS:
        raise TooManyAlerts([{"path": "alerts", "message": f"the notification holds {len(alerts)} alerts; at most {MAX_ITEMS} "
                                                           "per request (set max_alerts in Alertmanager's webhook_config)"}])
    notification = Notification([], [])
    for index, alert in enumerate(alerts):
        try:
            notification.alerts.append(_parse_alert(alert, index, catch_all))
        except _PutAside as exc:
            notification.rejected.append((index, exc.path, f"{exc.message}: the alert is not stored"))
    return notification


def store_alerts(project, alerts: list[AlertmanagerAlert], now=None) -> tuple[int, int]:
    """Store the alerts on their runs; returns (events opened, events ended). One transaction."""
    now = now or timezone.now()
    catch_all = project.catch_all_run_id
    by_run = defaultdict(list)
    for alert in alerts:
        by_run[alert.run_id].append(alert)
    opened = ended = 0
    with transaction.atomic():
        # Runs in id order and the catch-all last (alerts refused by their run join it): one lock order for all.
        for run_id in [*sorted(by_run.keys() - {catch_all}), catch_all]:
            if not by_run[run_id]:
                continue
            try:
                run = locked_run(project, Batch(run={"id": run_id}), now)
            except RunOfAnotherProject:
                if run_id == catch_all:
                    raise
                for alert in by_run[run_id]:
                    alert.run_id = catch_all
                    alert.note(f"alerts[{alert.index}].labels.run", f"run {run_id!r} belongs to another project: "
                                                                    "the alert is kept on this project's catch-all run")
                by_run[catch_all] += by_run[run_id]
                continue
            counts = _store_run(run, by_run[run_id], now)
            opened, ended = opened + counts[0], ended + counts[1]
    return opened, ended


def _store_run(run, alerts, now) -> tuple[int, int]:
    received_at = now.timestamp()
    known = Event.objects.filter(run=run, source=EventSource.ALERTMANAGER, fingerprint__in={a.fingerprint for a in alerts})
    known = list(known.only("id", "fingerprint", "time", "ended_at"))
    open_events = {e.fingerprint: e for e in known if e.ended_at is None}
    incidents = {(e.fingerprint, e.time) for e in known}
    new, ends = [], {}
    for alert in alerts:
        when = alert.starts_at if alert.starts_at is not None else received_at
        end = alert.ends_at if alert.ends_at is not None else received_at
        event = open_events.get(alert.fingerprint)
        if alert.status == "resolved" and event is not None:
            del open_events[alert.fingerprint]
            if event.pk is None:
                event.ended_at = end  # it fired earlier in this same notification
            else:
                ends[event.pk] = end
            continue
        if event is not None or (alert.fingerprint, when) in incidents:
            continue  # a repeat of the open incident, or of one already over
        event = Event(
            run=run, source=EventSource.ALERTMANAGER, layer=Layer.SYSTEM, attempt=run.attempt,
            step=alert.step if alert.step is not None else max(run.max_step or 0, 0), component=alert.component,
            condition=alert.condition, magnitude=db_float(alert.magnitude), time=when, detail=alert.detail,
            fingerprint=alert.fingerprint, ended_at=end if alert.status == "resolved" else None,
        )
        incidents.add((alert.fingerprint, when))
        if alert.status == "firing":
            open_events[alert.fingerprint] = event
        new.append(event)
    if not new and not ends:
        return 0, 0  # only repeats: nothing happened, no receipt, nothing to evaluate
    receipt = BatchReceipt.objects.create(run=run, received_at=now, queued_at=now, events=len(new), max_step=run.max_step)
    for event in new:
        event.receipt = receipt
        event.ended_by = receipt if event.ended_at is not None else None
    Event.objects.bulk_create(new)
    if ends:
        # One statement for many rows (an ORM update per event, or a CASE per event, costs ~1 ms each);
        # still conditional, so only an open event ends.
        table = connection.ops.quote_name(Event._meta.db_table)
        with connection.cursor() as cursor:
            cursor.executemany(f"UPDATE {table} SET ended_at = %s, ended_by_id = %s WHERE id = %s AND ended_at IS NULL",
                               [(end, receipt.pk, pk) for pk, end in ends.items()])
    # The run's ingest lock has been held since the open events were read: each of them ends here.
    ended = sum(event.ended_at is not None for event in new) + len(ends)
    Run.objects.filter(pk=run.pk).update(last_seen_at=now)
    transaction.on_commit(lambda: announce_batch_stored(receipt.id), robust=True)
    return len(new), ended
