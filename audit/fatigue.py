"""Alert fatigue of a project over a period, per UTC day: how much the console asks of people and how much of it
was worth it.

- alerts: fired that day; incidents: opened that day (of the project's runs; with an owner, those whose origin
  alert's rule has that owner);
- pages: alerts of rules whose permitted response is notify or review (alerts/fatigue.py);
- actionable share: actionable / (actionable + false_alarm) among the day's alerts' verdicts (the alert's own,
  latest, verdict); None on a day without verdicts;
- time to acknowledge: the median seconds from fired_at to the first acknowledged row, of the day's alerts.
The reference lines are the figures the issue starts from: 85-99% of alarm signals needing no action (Joint
Commission, 2013), 88.8% of annotated ICU arrhythmia alarms false (Drew et al., 2014).
"""
from collections import defaultdict
from datetime import timedelta
from statistics import median

from alerts.fatigue import PAGING_RESPONSES, rules_to_fix_first
from alerts.models import Alert, AlertChange, ChangeKind, Incident, Rule, Verdict

REFERENCE_NO_ACTION = (0.85, 0.99)
REFERENCE_FALSE = 0.888


MAX_DAYS = 400  # the charts' longest axis: a longer period shows its last 400 days


def days(period) -> list:
    """The UTC days the period touches (none for an empty period)."""
    if period.since >= period.until:
        return []
    first, last = period.since.date(), (period.until - timedelta(microseconds=1)).date()
    count = min((last - first).days + 1, MAX_DAYS)
    return [last - timedelta(days=count - 1 - i) for i in range(count)]


def fatigue(project, period, owner=None) -> dict:
    rules = Rule.objects.filter(project=project)
    if owner:
        rules = rules.filter(owner=owner)
    rules = list(rules.order_by("name"))
    alerts = list(Alert.objects.filter(rule__in=rules, fired_at__gte=period.since, fired_at__lt=period.until)
                  .order_by("fired_at", "pk").values("pk", "rule_id", "fired_at", "verdict"))
    first_ack = {}
    # The period's alerts as a subquery, not their ids as parameters: 100,000 of them are one join, not a list.
    in_period = Alert.objects.filter(rule__in=rules, fired_at__gte=period.since, fired_at__lt=period.until).values("pk")
    for alert_id, at in (AlertChange.objects.filter(alert__in=in_period, kind=ChangeKind.ACKNOWLEDGED)
                         .order_by("at", "pk").values_list("alert_id", "at")):
        first_ack.setdefault(alert_id, at)
    incidents = Incident.objects.filter(run__project=project, opened_at__gte=period.since, opened_at__lt=period.until)
    if owner:
        incidents = incidents.filter(origin__rule__in=rules)
    paging = {r.pk for r in rules if r.permitted_response in PAGING_RESPONSES}

    axis = days(period)
    per_day = {d: {"alerts": 0, "pages": 0, "incidents": 0, "actionable": 0, "false_alarm": 0, "ack": []} for d in axis}
    per_rule = defaultdict(lambda: {d: 0 for d in axis})
    for a in alerts:
        day = per_day.get(a["fired_at"].date())
        if day is None:  # before the axis of a period longer than MAX_DAYS
            continue
        day["alerts"] += 1
        day["pages"] += a["rule_id"] in paging
        if a["verdict"] == Verdict.ACTIONABLE:
            day["actionable"] += 1
        elif a["verdict"] == Verdict.FALSE_ALARM:
            day["false_alarm"] += 1
        if a["pk"] in first_ack:
            day["ack"].append((first_ack[a["pk"]] - a["fired_at"]).total_seconds())
        per_rule[a["rule_id"]][a["fired_at"].date()] += 1
    for opened_at in incidents.values_list("opened_at", flat=True):
        if opened_at.date() in per_day:
            per_day[opened_at.date()]["incidents"] += 1

    def share(d):
        judged = d["actionable"] + d["false_alarm"]
        return d["actionable"] / judged if judged else None

    return {
        "days": [d.isoformat() for d in axis],
        "alerts": [per_day[d]["alerts"] for d in axis],
        "incidents": [per_day[d]["incidents"] for d in axis],
        "pages": [per_day[d]["pages"] for d in axis],
        "actionable_share": [share(per_day[d]) for d in axis],
        "median_ack_seconds": [median(per_day[d]["ack"]) if per_day[d]["ack"] else None for d in axis],
        "reference_no_action": list(REFERENCE_NO_ACTION),
        "reference_false": REFERENCE_FALSE,
        "rules": [{"rule": r.name, "rule_id": r.pk, "owner": r.owner, "alerts": [per_rule[r.pk][d] for d in axis],
                   "total": sum(per_rule[r.pk].values())}
                  for r in rules],
        "fix_first": [{"rule": r.name, "rule_id": r.pk, "false_pages": n}
                      for r, n in rules_to_fix_first(rules, since=period.since, until=period.until)],
    }
