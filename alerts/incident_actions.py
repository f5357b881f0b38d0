"""Acting on an incident: acknowledge, verdict and mute, each applied to its alerts through alerts/triage.py (one
row per alert changed) and recorded once on the incident. It sits above both: incidents.py groups and reads,
triage.py acts on one alert, and neither imports this.
"""
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from alerts import triage
from alerts.incidents import _change, _needs_review, _refresh_once, refresh
from alerts.models import Alert, AlertChange, AlertState, Incident, IncidentChangeKind


def _acting(incident, user, kind, now, act, note="", verdict=""):
    """Run `act(alert)` on each alert of the incident (locked); one IncidentChange row if any alert changed."""
    with transaction.atomic(), _refresh_once(incident):
        Incident.objects.select_for_update().filter(pk=incident.pk).values_list("pk", flat=True).get()
        alerts = list(Alert.objects.filter(incident=incident).select_related("rule", "run").order_by("id"))
        results = act(alerts)
        if results:
            _change(incident, kind, now, by=triage._actor(user), note=note, verdict=verdict)
            refresh(incident.pk, by=triage._actor(user), now=now, kinds=[kind])
    incident.refresh_from_db()
    return results


def acknowledge_incident(incident, user, now=None) -> list[AlertChange]:
    """Acknowledge each alert of the incident that can be (open ones, and hard invariants waiting for review).

    Returns the alerts' new rows (empty when every alert was acknowledged already). An incident with
    nothing left to acknowledge (all its alerts resolved and reviewed) is a ValidationError on `state`.
    """
    now = now or timezone.now()

    def act(alerts):
        if all(a.state == AlertState.RESOLVED and not _needs_review(a) for a in alerts):
            raise ValidationError({"state": f"incident {incident.pk} is resolved: a resolved incident cannot be acknowledged"})
        rows = []
        for alert in alerts:
            if alert.state == AlertState.RESOLVED and not _needs_review(alert):
                continue
            row = triage.acknowledge(alert, user, now=now)
            if row is not None:
                rows.append(row)
        return rows

    return _acting(incident, user, IncidentChangeKind.ACKNOWLEDGED, now, act)


def give_incident_verdict(incident, user, verdict, note="", now=None) -> list[AlertChange]:
    """The same verdict on each alert of the incident, each with its own row (alerts/triage.py checks it)."""
    now = now or timezone.now()
    return _acting(
        incident, user, IncidentChangeKind.VERDICT, now,
        lambda alerts: [triage.give_verdict(a, user, verdict, note=note, now=now) for a in alerts],
        note=triage._text(note, "note"), verdict=verdict if isinstance(verdict, str) else "",
    )


def mute_incident(incident, user, scope, reason, expires_at=None, *, duration_minutes=None, now=None):
    """Mute the rule of each open alert of the incident at `scope` (rule, run or component), until one expiry.

    One Mute per rule for the rule and run scopes (the first mute already covers the incident's other
    alerts of that rule), one per alert for the component scope; every alert muted gets its own row.
    Returns the mutes made. An incident with no open alert is a ValidationError on `state`.
    """
    now = now or timezone.now()

    def act(alerts):
        open_alerts = [a for a in alerts if a.state != AlertState.RESOLVED]
        if not open_alerts:
            raise ValidationError({"state": f"incident {incident.pk} is resolved: a resolved incident cannot be muted"})
        try:
            expiry = triage.parse_expiry(expires_at, duration_minutes, now)
        except ValidationError:
            expiry = None  # mute() below names the problem along with any other
        mutes = []
        for alert in open_alerts:
            if any(m.covers(alert) for m in mutes):
                continue
            given = {"expires_at": expiry} if expiry is not None else {"expires_at": expires_at, "duration_minutes": duration_minutes}
            mutes.append(triage.mute(alert, user, scope, reason, now=now, **given))
        return mutes

    mutes = _acting(incident, user, IncidentChangeKind.MUTED, now, act,
                    note=reason.strip() if isinstance(reason, str) else "")
    return mutes
