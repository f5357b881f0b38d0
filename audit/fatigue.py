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
from datetime import timedelta, timezone as dt_timezone
from statistics import median

from django.db import connection
from django.db.models import Count, Min
from django.db.models.functions import TruncDate

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
    # Counted by the database per rule, UTC day and verdict (a few hundred rows), not read alert by alert: the
    # period can hold 100,000 alerts (benchmarks/read_paths.py).
    in_period = Alert.objects.filter(rule__in=rules, fired_at__gte=period.since, fired_at__lt=period.until)
    counted = (in_period.annotate(day=TruncDate("fired_at", tzinfo=dt_timezone.utc)).order_by()
               .values_list("rule_id", "day", "verdict").annotate(n=Count("pk")))
    incidents = Incident.objects.filter(run__project=project, opened_at__gte=period.since, opened_at__lt=period.until)
    if owner:
        incidents = incidents.filter(origin__rule__in=rules)
    paging = {r.pk for r in rules if r.permitted_response in PAGING_RESPONSES}

    axis = days(period)
    per_day = {d: {"alerts": 0, "pages": 0, "incidents": 0, "actionable": 0, "false_alarm": 0} for d in axis}
    per_rule = defaultdict(lambda: {d: 0 for d in axis})
    for rule_id, day, verdict, n in counted:
        totals = per_day.get(day)
        if totals is None:  # before the axis of a period longer than MAX_DAYS
            continue
        totals["alerts"] += n
        totals["pages"] += n if rule_id in paging else 0
        if verdict == Verdict.ACTIONABLE:
            totals["actionable"] += n
        elif verdict == Verdict.FALSE_ALARM:
            totals["false_alarm"] += n
        per_rule[rule_id][day] += n
    for day, n in (incidents.annotate(day=TruncDate("opened_at", tzinfo=dt_timezone.utc)).order_by()
                   .values_list("day").annotate(n=Count("pk"))):
        if day in per_day:
            per_day[day]["incidents"] += n
    ack_medians = median_ack_by_day(in_period)

    def share(d):
        judged = d["actionable"] + d["false_alarm"]
        return d["actionable"] / judged if judged else None

    return {
        "days": [d.isoformat() for d in axis],
        "alerts": [per_day[d]["alerts"] for d in axis],
        "incidents": [per_day[d]["incidents"] for d in axis],
        "pages": [per_day[d]["pages"] for d in axis],
        "actionable_share": [share(per_day[d]) for d in axis],
        "median_ack_seconds": [ack_medians.get(d) for d in axis],
        "reference_no_action": list(REFERENCE_NO_ACTION),
        "reference_false": REFERENCE_FALSE,
        "rules": [{"rule": r.name, "rule_id": r.pk, "owner": r.owner, "alerts": [per_rule[r.pk][d] for d in axis],
                   "total": sum(per_rule[r.pk].values())}
                  for r in rules],
        "fix_first": [{"rule": r.name, "rule_id": r.pk, "false_pages": n}
                      for r, n in rules_to_fix_first(rules, since=period.since, until=period.until)],
    }


# The median per UTC day of fired_at -> first acknowledgement, as statistics.median gives it: percentile_disc picks
# the two middle values (see audit/figures.py) and Python takes their mean.
_ACK_MEDIANS = """
SELECT (a.fired_at AT TIME ZONE 'UTC')::date AS day,
       PERCENTILE_DISC(ARRAY[0.5, 0.500000001]) WITHIN GROUP (
           ORDER BY (EXTRACT(EPOCH FROM f.acked) - EXTRACT(EPOCH FROM a.fired_at))::float8)
FROM ({alerts}) a
JOIN (SELECT alert_id, MIN(at) AS acked FROM alerts_alertchange WHERE kind = 'acknowledged' GROUP BY alert_id) f
    ON f.alert_id = a.id
GROUP BY 1
"""


def median_ack_by_day(alerts) -> dict:
    """{UTC day: median seconds from fired_at to the first acknowledged row} of `alerts` that were acknowledged."""
    if connection.vendor == "postgresql":
        sql, params = alerts.order_by().values("id", "fired_at").query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(_ACK_MEDIANS.format(alerts=sql), params)
            return {day: median(middles) for day, middles in cursor.fetchall()}
    waits = defaultdict(list)
    for fired_at, acked in (AlertChange.objects.filter(alert__in=alerts.values("pk"), kind=ChangeKind.ACKNOWLEDGED)
                            .order_by().values_list("alert_id", "alert__fired_at").annotate(acked=Min("at"))
                            .values_list("alert__fired_at", "acked")):
        waits[fired_at.date()].append((acked - fired_at).total_seconds())
    return {day: median(values) for day, values in waits.items()}
