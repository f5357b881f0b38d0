"""Incidents: one fault, one row in the inbox, with one named origin.

One NaN written into one weight fires the component's `weight_norm`, every
other component's `grad_norm` and the loss within the same step; a
label-corruption onset fires `gradient-explosion` on ten components at once.
Alerts of one run whose first steps fall within the project's window
(`IncidentSettings.window_steps`) and that are causally linked form one
incident:

- linked: they began at the same step, or both are model signals (weights,
  activations, gradients, loss), through which a fault spreads within a few
  steps (a backward pass, the next health sample). System metrics, events
  without a model meaning and absence are linked to others only at the same
  step.
- origin: the alert judged first by causal order (the schedule — a learning
  rate — then weights, then activations, then gradients, then loss, then the
  rest), then by the earliest first step,
  then by a metric's alert before an event's (the client's `unclassified`
  event may name the first component in forward order without knowing), then
  by the magnitude beyond the band (a non-finite value is beyond any), then by
  creation order.
- blast radius: the other (metric, component) pairs of its alerts.
- severity: the highest permitted response among its alerts (in
  PermittedResponse's order: observe < notify < review < stop < rewind).
- state: firing while an alert of it fires; else acknowledged, else muted
  while one is open; else needs review while a hard invariant of it waits for
  a person (alerts/review.py); else resolved.

Evaluation groups the alerts it created once the batch is judged
(`group_new_alerts`, under a lock on the run's row, so two batches of one run
group one at a time and an alert is grouped once). An alert that arrives
later and belongs to an incident that is not resolved joins it, and the
origin is judged again. Every change is an IncidentChange row; the run's and
project's websockets hear one `incident` frame per incident per change
(opsconsole/live.py).

Acting on an incident (acknowledge, verdict, mute) is alerts/incident_actions.py:
through alerts/triage.py, so each alert still gets its own AlertChange row,
and the incident gets one row for the action.

The judging functions (`signal_of`, `origin_of`, `place`, …) read only plain
attributes (first_step, metric, condition, magnitude, pk, state, reviewed_at,
rule.kind, rule.name, rule.permitted_response), so the migration that groups
the alerts stored before incidents existed uses them too.
"""
from __future__ import annotations

import math
import threading
from contextlib import contextmanager

from django.db import transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from alerts import signals
from alerts.governance import sticky
from alerts.models import (
    DEFAULT_INCIDENT_WINDOW_STEPS, Alert, AlertChange, AlertState, Incident, IncidentChange, IncidentChangeKind,
    IncidentSettings, IncidentState, PermittedResponse, RuleKind,
)
from opsconsole.live import publish

WEIGHTS, ACTIVATIONS, GRADIENTS, LOSS = range(4)
# The schedule drives everything after it: a learning rate that collapses freezes every component at once, and
# what a reviewer acts on is the schedule, not the components it froze. Ranked before the model's own signals.
SCHEDULE = -1
SIGNAL_NAMES = {SCHEDULE: "schedule", WEIGHTS: "weights", ACTIVATIONS: "activations", GRADIENTS: "gradients",
                LOSS: "loss"}
SCHEDULE_METRICS = ("lr", "learning_rate")
OTHER = len(SIGNAL_NAMES)  # system metrics, absence, events without a model meaning: after the model's signals
SIGNAL_OF_METRIC = {
    "weight_norm": WEIGHTS,
    "act_norm": ACTIVATIONS, "act_max": ACTIVATIONS, "dead_fraction": ACTIVATIONS,
    "grad_norm": GRADIENTS, "update_ratio": GRADIENTS,
}
# The client's conditions (ingest.contract.CONDITIONS): `unclassified` is its non-finite weight or activation
# event, `stagnant` a frozen update ratio, `low_confidence` the model's output.
SIGNAL_OF_CONDITION = {
    "unclassified": WEIGHTS,
    "dead": ACTIVATIONS, "saturated": ACTIVATIONS,
    "exploding": GRADIENTS, "lost_gradient": GRADIENTS, "oscillating": GRADIENTS, "stagnant": GRADIENTS,
    "low_confidence": LOSS,
}
SEVERITY_RANK = {response: rank for rank, response in enumerate(PermittedResponse.values)}


def signal_of(alert) -> int | None:
    """Where in the model the alert's signal sits (WEIGHTS … LOSS), or None when it is not a model signal."""
    rule = alert.rule
    if rule.kind == RuleKind.ABSENCE:
        return None  # missing data says nothing about where in the model a fault is
    if rule.kind == RuleKind.WEIGHT_JUMP:
        return WEIGHTS  # the component's own weights moved more than its optimizer could have moved them
    metric = alert.metric or ""
    if metric:
        if metric in SCHEDULE_METRICS or metric.startswith(tuple(f"{m}/" for m in SCHEDULE_METRICS)):
            return SCHEDULE
        if metric in ("weight_norm", "update_ratio") and "weight" in rule.name:
            return WEIGHTS  # a weight rule of another kind reading these (a threshold on update_ratio named so)
        if metric in SIGNAL_OF_METRIC:
            return SIGNAL_OF_METRIC[metric]
        for prefix, signal in (("weight", WEIGHTS), ("act", ACTIVATIONS), ("grad", GRADIENTS)):
            if metric.startswith(prefix):
                return signal
        if "loss" in metric or metric in ("perplexity", "ppl") or metric.startswith(("val/", "eval/")):
            return LOSS
        return None
    return SIGNAL_OF_CONDITION.get(alert.condition or "")


def linked(a, b) -> bool:
    """Causally linked: the same first step, or both model signals (a fault spreads through the model)."""
    return a.first_step == b.first_step or (signal_of(a) is not None and signal_of(b) is not None)


def origin_key(alert):
    signal = signal_of(alert)
    magnitude = alert.magnitude
    beyond = magnitude if magnitude is not None and not math.isnan(magnitude) else -math.inf
    if alert.rule.kind == RuleKind.NONFINITE:
        beyond = math.inf  # a non-finite value is beyond any band (its magnitude counts points, not distance)
    return (OTHER if signal is None else signal, alert.first_step, 0 if alert.metric else 1, -beyond, alert.pk)


def origin_of(alerts):
    """The alert named as the incident's origin.

    One exception to the causal order: gradients going non-finite on several components and on the run as a
    whole at the same step (a loss scaler overflowing, every backward pass) have no component of origin; the
    run-level alert is named, not whichever component was created first.
    """
    first = _first_sent(min(alerts, key=origin_key), alerts)
    if first.rule.kind != RuleKind.NONFINITE or not first.component:
        return first
    same = [a for a in alerts if a.rule.kind == RuleKind.NONFINITE and a.first_step == first.first_step
            and signal_of(a) == signal_of(first)]
    run_level = [a for a in same if not a.component]
    if run_level and len({a.component for a in same if a.component}) >= 2:
        return min(run_level, key=origin_key)
    return first


def _first_sent(first, alerts):
    """Of the alerts tied with `first` on everything but creation order (a storm: every layer non-finite at one
    step), the one whose series the run sent first: the job's own order of its layers. Creation order follows
    how the job cut its telemetry into batches (a batch can only create its own alerts), so it names no origin."""
    head = origin_key(first)[:-1]
    tied = [a for a in alerts if origin_key(a)[:-1] == head]
    if len(tied) < 2:
        return first
    from ingest.models import Series

    sent = dict(((metric, component), pk) for metric, component, pk in Series.objects.filter(
        run_id=first.run_id, metric__in={a.metric for a in tied}, component__in={a.component for a in tied},
    ).values_list("metric", "component", "pk"))
    return min(tied, key=lambda a: (sent.get((a.metric, a.component), math.inf), a.pk))


def severity_of(alerts) -> str:
    return max((a.rule.permitted_response for a in alerts), key=lambda r: SEVERITY_RANK.get(r, -1))


def blast_radius(alerts, origin) -> list[dict]:
    """The other (metric, component) pairs the incident touched, in causal order."""
    seen, radius = {(origin.metric, origin.component)}, []
    for alert in sorted(alerts, key=origin_key):
        key = (alert.metric, alert.component)
        if key not in seen:
            seen.add(key)
            radius.append({"metric": alert.metric or None, "component": alert.component or None})
    return radius


def _needs_review(alert) -> bool:
    return sticky(alert.rule) and alert.state == AlertState.RESOLVED and alert.reviewed_at is None


def state_of(alerts) -> str:
    states = {a.state for a in alerts}
    for state in (AlertState.FIRING, AlertState.ACKNOWLEDGED, AlertState.MUTED):
        if state in states:
            return str(state)
    if any(_needs_review(a) for a in alerts):
        return IncidentState.NEEDS_REVIEW
    return IncidentState.RESOLVED


def resolved_at_of(alerts):
    """When the last of its alerts' conditions cleared; None while one is open."""
    if any(a.state != AlertState.RESOLVED for a in alerts):
        return None
    return max((a.resolved_at for a in alerts if a.resolved_at is not None), default=None)


def place(alert, groups, window: int):
    """The index in `groups` (lists of alerts, each with at least one) the alert belongs to, or None.

    It belongs to a group when its first step is within `window` steps of the group's first step and it
    is linked to one of the group's alerts; of several, the one whose first step is nearest (then the oldest).
    """
    best = None
    for index, members in enumerate(groups):
        first = min(m.first_step for m in members)
        distance = abs(alert.first_step - first)
        if distance > window or not any(linked(alert, m) for m in members):
            continue
        if best is None or distance < best[0]:
            best = (distance, index)
    return None if best is None else best[1]


def arrival_key(alert):
    """The order new alerts are placed in: by first step, causes first, then creation."""
    signal = signal_of(alert)
    return (alert.first_step, OTHER if signal is None else signal, alert.pk)


def window_steps(project_id) -> int:
    settings = IncidentSettings.objects.filter(project_id=project_id).values_list("window_steps", flat=True).first()
    return DEFAULT_INCIDENT_WINDOW_STEPS if settings is None else settings


# --- grouping, as evaluation creates alerts ------------------------------------------------------------

def group_new_alerts(run, receipt=None, now=None, receipts=None) -> list[Incident]:
    """Put every alert of the run that is in no incident into one; bring the incidents the batch touched up to date.

    Idempotent: an alert is grouped once (its `incident` is set with a conditional update, under a lock
    on the run's row that serialises groupings of one run). Returns the incidents it opened or changed.
    """
    from ingest.models import Run  # the run's row is the lock: every grouping of one run takes it first

    now = now or timezone.now()
    touched_ids = set()
    receipts = receipts or ([receipt] if receipt is not None else [])
    if receipts:
        # Incidents whose alerts this batch (or the batches judged with it) extended or resolved: their state,
        # first step and origin follow.
        touched_ids = set(
            AlertChange.objects.filter(receipt__in=receipts, alert__incident__isnull=False)
            .order_by().values_list("alert__incident_id", flat=True).distinct()  # unordered: else DISTINCT takes the order's columns too
        )
    # Most batches change no alert: answer them without taking the run's row lock.
    if not touched_ids and not Alert.objects.filter(run=run, incident__isnull=True).exists():
        return []
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True).first()
        new = list(Alert.objects.filter(run=run, incident__isnull=True).select_related("rule", "run"))
        if not new and not touched_ids:
            return []
        open_incidents = list(
            Incident.objects.select_for_update().filter(run=run).exclude(state=IncidentState.RESOLVED).order_by("first_step", "id")
        )
        incidents = {i.pk: i for i in open_incidents}
        incidents |= {i.pk: i for i in Incident.objects.select_for_update().filter(pk__in=touched_ids - set(incidents))}
        members = {pk: [] for pk in incidents}
        for alert in Alert.objects.filter(incident_id__in=list(incidents)).select_related("rule", "run").order_by("id"):
            members[alert.incident_id].append(alert)
        # Where each new alert goes: an open incident, or a group of this batch's that becomes a new one.
        groups = [(i, members[i.pk]) for i in open_incidents if members[i.pk]]
        joined = {}  # existing incident pk -> the alerts that join it
        window = window_steps(run.project_id)
        for alert in sorted(new, key=arrival_key):
            index = place(alert, [m for _, m in groups], window)
            if index is None:
                groups.append((None, [alert]))
                continue
            incident, group = groups[index]
            group.append(alert)
            if incident is not None:
                joined.setdefault(incident.pk, []).append(alert)
        changed = []
        for incident, group in groups:
            if incident is None:
                continue  # opened below, together: a batch's new groups come after the open incidents
            kinds = []
            for alert in joined.get(incident.pk, []):
                _change(incident, IncidentChangeKind.JOINED, now, alert=alert, receipt=receipt)
                kinds.append(IncidentChangeKind.JOINED)
            _claim(joined.get(incident.pk, []), incident)
            if incident.pk not in joined and incident.pk not in touched_ids:
                continue
            kinds += _summarize(incident, group, now, receipt=receipt)
            if kinds:
                _publish(incident, kinds, now)
                changed.append(incident)
        for pk in touched_ids - {i.pk for i, _ in groups if i is not None}:
            # A resolved incident whose alert this batch changed (a late batch extending it).
            if members[pk] and (kinds := _summarize(incidents[pk], members[pk], now, receipt=receipt)):
                _publish(incidents[pk], kinds, now)
                changed.append(incidents[pk])
        changed += _open_all(run, [group for incident, group in groups if incident is None], now, receipt)
        if new:
            # Announced once grouped, so a subscriber sees each alert's incident (e.g. a review that links both).
            signals.alerts_fired.send(sender=Alert, alerts=sorted(new, key=arrival_key), now=now)
        return changed


def _claim(alerts, incident):
    """The alerts are the incident's; only alerts in no incident yet are taken (grouping is idempotent)."""
    if alerts:
        Alert.objects.filter(pk__in=[a.pk for a in alerts], incident__isnull=True).update(incident=incident)
        for alert in alerts:
            alert.incident = incident


def _open_all(run, groups, now, receipt) -> list[Incident]:
    """An incident for each group of alerts, in their order: each write once for all of them (a batch that fires a
    dozen unrelated alerts opened a dozen incidents four round trips each)."""
    if not groups:
        return []
    origins = [origin_of(alerts) for alerts in groups]
    opened = Incident.objects.bulk_create([
        Incident(run=run, origin=origin, first_step=min(a.first_step for a in alerts), severity=severity_of(alerts),
                 state=state_of(alerts), opened_at=now, resolved_at=resolved_at_of(alerts))
        for origin, alerts in zip(origins, groups)
    ])
    if len(opened) == 1:
        _claim(groups[0], opened[0])
    else:  # _claim for each, in one UPDATE
        Alert.objects.filter(pk__in=[a.pk for alerts in groups for a in alerts], incident__isnull=True).update(
            incident_id=Case(*[When(pk__in=[a.pk for a in alerts], then=Value(incident.pk))
                               for incident, alerts in zip(opened, groups)]))
        for incident, alerts in zip(opened, groups):
            for alert in alerts:
                alert.incident = incident
    IncidentChange.objects.bulk_create([
        IncidentChange(incident=incident, kind=IncidentChangeKind.OPENED, alert=origin, state=incident.state, at=now,
                       receipt=receipt,
                       note=f"{len(alerts)} alert{'s' if len(alerts) != 1 else ''}; origin {describe_origin(origin)}")
        for incident, origin, alerts in zip(opened, origins, groups)
    ])
    for incident in opened:
        _publish(incident, [IncidentChangeKind.OPENED], now)
    return opened


def _change(incident, kind, now, *, alert=None, by=None, receipt=None, note="", state="", previous="", verdict=""):
    return IncidentChange.objects.create(
        incident=incident, kind=kind, alert=alert, state=state, previous=previous, at=now, by=by, receipt=receipt,
        note=note, verdict=verdict,
    )


def _summarize(incident, alerts, now, *, receipt=None, by=None) -> list[str]:
    """Bring the incident's origin, first step, severity and state up to its alerts; a row for each change."""
    kinds = []
    origin = origin_of(alerts)
    updates = {}
    if origin.pk != incident.origin_id:
        _change(incident, IncidentChangeKind.ORIGIN, now, alert=origin, receipt=receipt, by=by,
                note=f"origin judged again: {describe_origin(origin)}")
        kinds.append(IncidentChangeKind.ORIGIN)
        updates["origin"] = origin
    state = state_of(alerts)
    if state != incident.state:
        _change(incident, IncidentChangeKind.STATE, now, receipt=receipt, by=by, state=state, previous=incident.state)
        kinds.append(IncidentChangeKind.STATE)
        updates["state"] = state
    for field, value in (("first_step", min(a.first_step for a in alerts)), ("severity", severity_of(alerts)),
                         ("resolved_at", resolved_at_of(alerts))):
        if getattr(incident, field) != value:
            updates[field] = value
    if updates:
        Incident.objects.filter(pk=incident.pk).update(**updates)
        for field, value in updates.items():
            setattr(incident, field, value)
    return kinds


def describe_origin(alert) -> str:
    what = alert.metric or alert.condition or alert.rule.name
    where = alert.component or "the run"
    return f"{SIGNAL_NAMES.get(signal_of(alert), 'other')}: {what} of {where} at step {alert.first_step}"


# --- keeping the state in step with alerts changed outside evaluation --------------------------------

_local = threading.local()  # .deferred: incident pks whose refresh the caller does once at the end


def _deferred() -> set:
    if getattr(_local, "deferred", None) is None:
        _local.deferred = set()
    return _local.deferred


@contextmanager
def _refresh_once(incident):
    """Inside, alerts' changes do not refresh the incident one by one; it is refreshed once by the caller."""
    deferred = _deferred()
    added = incident.pk not in deferred
    deferred.add(incident.pk)
    try:
        yield
    finally:
        if added:
            deferred.discard(incident.pk)


def alert_changed(alert, kind, *, receipt=None, by=None, now=None) -> None:
    """Called for every AlertChange (alerts/changes.py): the alert's incident follows a person's or a sweep's change.

    Evaluation's own changes (those with a receipt) are brought up to date once per batch by
    group_new_alerts, and fired/extended rows change no state.
    """
    from alerts.models import ChangeKind

    incident_id = getattr(alert, "incident_id", None)
    if incident_id is None or receipt is not None or kind in (ChangeKind.FIRED, ChangeKind.EXTENDED):
        return
    if incident_id in _deferred():
        return
    refresh(incident_id, by=by, now=now)


def refresh(incident_id, *, by=None, now=None, kinds=()) -> Incident | None:
    """Bring the incident up to its alerts (under its row lock) and tell its run's listeners."""
    now = now or timezone.now()
    with transaction.atomic():
        incident = Incident.objects.select_for_update().filter(pk=incident_id).select_related("run").first()
        if incident is None:
            return None
        alerts = list(Alert.objects.filter(incident=incident).select_related("rule", "run").order_by("id"))
        if not alerts:
            return incident
        written = list(kinds) + _summarize(incident, alerts, now, by=by)  # an action's own kind first
        if written:
            _publish(incident, written, now, by=by)
        return incident


def _publish(incident, kinds, now, by=None, note=""):
    signals.incident_changed.send(sender=Incident, incident=incident, kinds=kinds, now=now)
    publish(incident.run, "incident", _IncidentFrame(incident.pk, kinds, now, by, note))


class _IncidentFrame:
    """An incident's live frame, built at commit as the incident then stands (opsconsole/live.py)."""

    def __init__(self, pk, kinds, now, by, note):
        self.pk, self.kinds, self.now, self.by, self.note = pk, kinds, now, by, note
        self.loaded = None  # (incident or None, its alerts) once prefetch has read them

    @classmethod
    def prefetch(cls, frames):
        """Every frame's incident and alerts in two queries."""
        found = with_alert_lists(Incident.objects.select_related("run", "origin__rule").filter(pk__in={f.pk for f in frames}))
        incidents = {i.pk: i for i in found}
        for frame in frames:
            incident = incidents.get(frame.pk)
            frame.loaded = (incident, None if incident is None else incident.alert_list)

    def __call__(self):
        if self.loaded is None:
            fresh, alerts = Incident.objects.select_related("run", "origin__rule").get(pk=self.pk), None
        else:
            fresh, alerts = self.loaded
            if fresh is None:
                raise Incident.DoesNotExist(f"incident {self.pk} is gone")
        return {
            "change": str(self.kinds[0]),
            "changes": [str(k) for k in self.kinds],
            "at": self.now,
            "by": self.by.get_username() if self.by is not None else None,
            "note": self.note,
            "incident": incident_as_dict(fresh, alerts),
        }


# --- reading ---------------------------------------------------------------------------------------------

def incident_as_dict(incident, alerts=None) -> dict:
    """The API's and the websocket's shape of an incident (`run`, `origin__rule` loaded)."""
    if alerts is None:
        alerts = list(Alert.objects.filter(incident=incident).select_related("rule").order_by("id"))
    origin = incident.origin
    return {
        "id": incident.pk,
        "run": incident.run.run_id,
        "state": incident.state,
        "severity": incident.severity,
        "first_step": incident.first_step,
        "origin": None if origin is None else {
            "alert": origin.pk,
            "rule": origin.rule.name,
            "metric": origin.metric or None,
            "component": origin.component or None,
            "step": origin.first_step,
        },
        "alerts": sorted(a.pk for a in alerts),
        "blast_radius": blast_radius(alerts, origin) if origin is not None and alerts else [],
        "opened_at": incident.opened_at,
        "resolved_at": incident.resolved_at,
    }


def incidents_of_run(run):
    """The run's incidents, oldest first, each with its alerts loaded (`incident.alert_list`)."""
    return with_alert_lists(run_incidents(run))


def run_incidents(run):
    """The run's incidents, oldest first, as a queryset (to page before their alerts are loaded)."""
    return Incident.objects.filter(run=run).select_related("run", "origin__rule").order_by("opened_at", "id")


def with_alert_lists(incidents):
    """`incidents` (any iterable) as a list, each with its alerts loaded in one query (`incident.alert_list`)."""
    incidents = list(incidents)
    by_pk = {i.pk: i for i in incidents}
    for incident in incidents:
        incident.alert_list = []
    for alert in Alert.objects.filter(incident__in=incidents).select_related("rule", "run").order_by("id"):
        by_pk[alert.incident_id].alert_list.append(alert)
    return incidents


def visible_incident(user, pk) -> Incident:
    """The incident if the caller may see its run's project; 404 otherwise (its existence is not revealed)."""
    from django.shortcuts import get_object_or_404

    from opsconsole.permissions import visible_projects

    incidents = Incident.objects.filter(run__project__in=visible_projects(user)).select_related("run__project", "origin__rule")
    return get_object_or_404(incidents, pk=pk)
