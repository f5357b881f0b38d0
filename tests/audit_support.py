"""Made-up alert histories for the audit tests: alerts, their change rows, mutes and revisions at chosen times."""
import itertools
from datetime import datetime, timedelta, timezone as tz

from alerts.models import Alert, AlertChange, ChangeKind, Incident, Mute, MuteEndReason, MuteScope
from audit.report import Period
from ingest.models import Run

T0 = datetime(2026, 3, 2, 0, 0, tzinfo=tz.utc)  # a Monday, the period's start
PERIOD = Period(T0, T0 + timedelta(days=7))
_components = itertools.count()  # an open alert is one per (rule, run, component): each made-up alert has its own


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def fire(rule, hours, *, run="run-a", resolved=None, incident=None, verdict=None, reviewed=False) -> Alert:
    """An alert fired `hours` after T0 (resolved `resolved` hours after T0), with its fired row."""
    run_obj, _ = Run.objects.get_or_create(run_id=run, defaults={"project": rule.project})
    alert = Alert.objects.create(
        rule=rule, run=run_obj, component=f"layers.{next(_components)}", metric="loss", first_step=10, last_step=11, fired_step=11,
        magnitude=2.0, magnitude_unit="σ", phase="steady", state="resolved" if resolved is not None else "firing",
        verdict=verdict, fired_at=at(hours), resolved_at=at(resolved) if resolved is not None else None,
        reviewed_at=at(hours) if reviewed else None,
    )
    AlertChange.objects.create(alert=alert, kind=ChangeKind.FIRED, step=11, at=alert.fired_at)
    if incident is not None:
        alert.incident = incident
        alert.save(update_fields=["incident"])
    return alert


def incident(run_id, project, hours=0):
    run, _ = Run.objects.get_or_create(run_id=run_id, defaults={"project": project})
    return Incident.objects.create(run=run, first_step=10, severity="notify", opened_at=at(hours))


def change(alert, kind, hours, *, by=None, verdict=""):
    if kind == ChangeKind.VERDICT:
        alert.verdict = verdict
        alert.save(update_fields=["verdict"])
    return AlertChange.objects.create(alert=alert, kind=kind, at=at(hours), by=by, verdict=verdict)


def mute(rule, start, expires, *, ended=None, by=None) -> Mute:
    """A rule-scope mute made by `by`; `ended`: the hour `by` ended it by hand."""
    ended_fields = {"ended_at": at(ended), "ended_by": by, "end_reason": MuteEndReason.ENDED_BY_PERSON} if ended is not None else {}
    return Mute.objects.create(project=rule.project, scope=MuteScope.RULE, rule=rule, reason="noisy", created_by=by,
                               created_at=at(start), expires_at=at(expires), **ended_fields)


def owned_rule(project, name, owner, **kwargs):
    """make_rule with another owner text (the factory's is the pretrain team's)."""
    from tests.factories import make_rule

    rule = make_rule(project, name, **kwargs)
    type(rule).objects.filter(pk=rule.pk).update(owner=owner)
    rule.owner = owner
    return rule
