"""The report's figures, computed by the database (audit/figures.py), equal the plain Python reading of their
definitions (audit/report.py) to the last digit, on a made-up history full of edge cases. Run on SQLite and on
PostgreSQL (DATABASE_URL): each has its own way to the figures."""
import random
from datetime import timedelta
from statistics import median

import pytest

from alerts.models import Alert, AlertChange, ChangeKind, Mute
from audit.report import Period, report_rows
from tests.audit_support import PERIOD, T0, change, fire, incident, mute, owned_rule

pytestmark = pytest.mark.django_db


def at_us(hours: float, micros: int = 0):
    return T0 + timedelta(hours=hours, microseconds=micros)


@pytest.fixture
def history(project, owner):
    """Four rules: one of random alerts at odd microseconds (overlapping, nested, touching, outliving the period),
    one of hand-made edge cases, one that fired only outside the period, one that never fired."""
    rng = random.Random(23)
    noisy = owned_rule(project, "noisy", "olivia")
    edge = owned_rule(project, "edge", "olivia", kind="threshold")
    outside = owned_rule(project, "outside", "olivia", kind="nonfinite")
    owned_rule(project, "never", "olivia", kind="absence")
    incidents = [incident(f"run-{i}", project, i) for i in range(4)]
    for i in range(120):
        start = rng.uniform(-30, 190)  # some before the period, some after it
        resolved = None if rng.random() < 0.15 else start + rng.choice([0, 0.001, rng.uniform(0, 40)])
        alert = fire(noisy, start, run=f"run-{rng.randrange(6)}", resolved=resolved,
                     incident=rng.choice([None, *incidents]), verdict=rng.choice([None, "", "actionable", "false_alarm"]),
                     reviewed=rng.random() < 0.1)
        Alert.objects.filter(pk=alert.pk).update(fired_at=at_us(start, rng.randrange(1_000_000)))
        alert.refresh_from_db()
        for _ in range(rng.randrange(4)):
            kind = rng.choice([ChangeKind.ACKNOWLEDGED, ChangeKind.VERDICT, ChangeKind.RESOLVED, ChangeKind.EXTENDED])
            verdict = rng.choice(["", "actionable", "false_alarm"]) if kind == ChangeKind.VERDICT else ""
            row = AlertChange.objects.create(alert=alert, kind=kind, verdict=verdict, by=rng.choice([None, owner]),
                                             at=alert.fired_at + timedelta(seconds=rng.uniform(-60, 9000)))
            if rng.random() < 0.2:  # two changes at the same moment: the later row wins
                AlertChange.objects.create(alert=alert, kind=kind, verdict=verdict, by=row.by, at=row.at)
    # Edge cases: an alert exactly at `since` and one exactly at `until`; intervals touching end to start; one
    # inside another; one resolved before it fired; the same fired_at twice; an even count of resolve times.
    fire(edge, 0, resolved=2)
    fire(edge, 2, resolved=5)
    fire(edge, 3, resolved=4)
    fire(edge, 10, resolved=9)
    fire(edge, 10, resolved=12)
    fire(edge, 168)
    only_reviewed = fire(edge, 20, reviewed=True)
    given = fire(edge, 30, resolved=31, verdict="false_alarm")  # its own verdict, no verdict row
    changed = fire(edge, 40, resolved=41, verdict="false_alarm")
    change(changed, ChangeKind.VERDICT, 40.5, by=owner, verdict="actionable")
    Alert.objects.filter(pk=changed.pk).update(verdict="false_alarm")  # the row's verdict counts, not the field's
    change(given, ChangeKind.VERDICT, 30.5, by=owner, verdict="")  # a verdict row without one
    change(only_reviewed, ChangeKind.RESOLVED, 21)  # by the evaluator: no triage
    fire(outside, -48, resolved=-47)
    fire(outside, 200)
    for rule in (noisy, edge):
        mute(rule, -10, 3)
        mute(rule, 1, 2)  # inside the one before
        mute(rule, 3, 24.5, ended=12, by=owner)  # touches it
        mute(rule, 100, 400)  # outlives the period
        mute(rule, -50, -20)  # over before it
    return project


def merged(intervals):
    out = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def seconds(intervals) -> float:
    return sum((e - s for s, e in intervals), timedelta()).total_seconds()


def expected(rule, period: Period) -> dict:
    """The definitions in audit/report.py, read the plainest way: every row into Python."""
    alerts = list(Alert.objects.filter(rule=rule, fired_at__gte=period.since, fired_at__lt=period.until))
    triaged = verdict_given = 0
    false_alarms = actionable = 0
    acks, resolves, firing = [], [], []
    for a in alerts:
        changes = list(a.changes.order_by("at", "pk"))
        by_person = [c for c in changes if c.kind in (ChangeKind.ACKNOWLEDGED, ChangeKind.VERDICT)
                     or (c.kind == ChangeKind.RESOLVED and c.by_id)]
        triaged += bool(by_person) or a.reviewed_at is not None
        verdicts = [c.verdict for c in changes if c.kind == ChangeKind.VERDICT and c.verdict]
        verdict_given = verdicts[-1] if verdicts else (a.verdict or None)
        false_alarms += verdict_given == "false_alarm"
        actionable += verdict_given == "actionable"
        first_ack = next((c.at for c in changes if c.kind == ChangeKind.ACKNOWLEDGED), None)
        if first_ack is not None:
            acks.append((first_ack - a.fired_at).total_seconds())
        if a.resolved_at is not None:
            resolves.append((a.resolved_at - a.fired_at).total_seconds())
        firing.append((max(a.fired_at, period.since), min(a.resolved_at or period.until, period.until)))
    mutes = [m for m in Mute.objects.filter(rule=rule)
             if m.created_at < period.until and (m.ended_at or m.expires_at) > period.since]
    muted = merged((max(m.created_at, period.since), min(m.ended_at or m.expires_at, period.until)) for m in mutes)
    firing = merged(firing)
    overlap = [(max(s1, s2), min(e1, e2)) for s1, e1 in firing for s2, e2 in muted if min(e1, e2) > max(s1, s2)]
    return {
        "fires": len(alerts), "incidents": len({a.incident_id for a in alerts} - {None}),
        "runs": len({a.run_id for a in alerts}), "triaged": triaged, "false_alarms": false_alarms,
        "actionable": actionable, "median_ack_seconds": median(acks) if acks else None,
        "median_resolve_seconds": median(resolves) if resolves else None, "mutes": len(mutes),
        "muted_hours": seconds(muted) / 3600, "firing_hours": seconds(firing) / 3600,
        "muted_share": seconds(overlap) / seconds(firing) if firing else None,
        "last_fired": max((a.fired_at for a in Alert.objects.filter(rule=rule, fired_at__lt=period.until)), default=None),
    }


FIGURES = ["fires", "incidents", "runs", "triaged", "false_alarms", "actionable", "median_ack_seconds",
           "median_resolve_seconds", "mutes", "muted_hours", "firing_hours", "muted_share", "last_fired"]


@pytest.mark.parametrize("period", [
    PERIOD,
    Period(at_us(2.5, 123_457), at_us(100, 999_999)),  # bounds inside alerts and mutes
    Period(PERIOD.until, PERIOD.since),  # empty
], ids=["week", "cut-through", "empty"])
def test_every_figure_equals_the_python_definition(history, period):
    from alerts.models import Rule

    rows = {r["rule"]: r for r in report_rows(history, period)}
    assert set(rows) == {"noisy", "edge", "outside", "never"}
    checked = 0
    for rule in Rule.objects.filter(project=history):
        want = expected(rule, period) if period.since < period.until else None
        got = rows[rule.name]
        if want is None:
            assert (got["fires"], got["firing_hours"], got["median_resolve_seconds"]) == (0, 0.0, None)
            continue
        want["last_fired"] = want["last_fired"].isoformat() if want["last_fired"] else None
        assert {k: got[k] for k in FIGURES} == want, rule.name
        checked += want["fires"]
    assert period.since >= period.until or checked > 50  # the history reaches into the period


def test_the_fatigue_figures_equal_the_python_definition(history):
    """audit/fatigue.py counts by day in the database; the same figures alert by alert."""
    from audit.fatigue import days, fatigue

    figures = fatigue(history, PERIOD)
    axis = days(PERIOD)
    alerts = list(Alert.objects.filter(rule__project=history, fired_at__gte=PERIOD.since, fired_at__lt=PERIOD.until))
    waits = {d: [] for d in axis}
    for a in alerts:
        first_ack = a.changes.filter(kind=ChangeKind.ACKNOWLEDGED).order_by("at", "pk").first()
        if first_ack is not None:
            waits[a.fired_at.date()].append((first_ack.at - a.fired_at).total_seconds())
    assert figures["alerts"] == [sum(a.fired_at.date() == d for a in alerts) for d in axis]
    assert figures["median_ack_seconds"] == [median(w) if w else None for w in waits.values()]
    judged = [[a.verdict for a in alerts if a.fired_at.date() == d and a.verdict in ("actionable", "false_alarm")]
              for d in axis]
    assert figures["actionable_share"] == [j.count("actionable") / len(j) if j else None for j in judged]
    assert sum(figures["alerts"]) > 50 and sum(1 for w in waits.values() if len(w) > 1) > 2
