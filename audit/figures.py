"""The rule report's figures of the period's alerts, per rule, computed by the database (definitions in audit/report.py).

The report covers every alert of its period (90,000 in benchmarks/read_paths.py); turning those rows into Python
objects took seconds, so no alert row leaves the database here:
- the counts (fires, incidents, runs, triaged, each verdict) are one aggregate query on any database;
- the durations (the medians of time to acknowledge and to resolve, firing time, firing time under a mute) are one
  window-function query on PostgreSQL. SQLite stores timestamps as text, so there they are computed in Python
  from the period's rows: the embedded database serves small deployments.

Each figure is exactly the one the plain Python definition gives (tests/test_audit_report_matches_python.py):
seconds are summed as exact intervals and converted to float once, and a median is the middle value, or the mean
of the two middle values, picked by row number (percentile_cont interpolates in float8, which can differ from
statistics.median in the last digit).
"""
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import median

from django.db import connection, transaction

from alerts.models import Alert, AlertChange, ChangeKind


def union(intervals) -> list[tuple[datetime, datetime]]:
    """Overlapping or touching [start, end) intervals merged; empty ones dropped."""
    merged = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def clip(intervals, period):
    return [(max(s, period.since), min(e, period.until)) for s, e in intervals]


def total_seconds(intervals) -> float:
    # Summed as exact intervals, converted once: the same float the database's exact sum gives (audit/figures.py).
    return sum((e - s for s, e in intervals), timedelta()).total_seconds()


def intersection(a, b) -> list[tuple[datetime, datetime]]:
    """Of two merged interval lists."""
    out = []
    for s1, e1 in a:
        for s2, e2 in b:
            s, e = max(s1, s2), min(e1, e2)
            if e > s:
                out.append((s, e))
    return union(out)


@dataclass
class AlertFigures:
    fires: int = 0
    incidents: int = 0
    runs: int = 0
    triaged: int = 0
    false_alarms: int = 0
    actionable: int = 0
    median_ack_seconds: float | None = None
    median_resolve_seconds: float | None = None
    firing_seconds: float = 0.0
    muted_while_firing: float = 0.0  # seconds of firing time that `muted` (the rule's merged mute intervals) covers


def alert_figures(rule_ids: list[int], period, muted: dict[int, list]) -> dict[int, AlertFigures]:
    """{rule pk: its figures} for every pk of `rule_ids`; `muted`: {rule pk: merged [start, end) mute intervals
    within the period}."""
    figures = {pk: AlertFigures() for pk in rule_ids}
    if not rule_ids or period.since >= period.until:
        return figures
    if connection.vendor == "postgresql":
        _in_sql(figures, period, muted)
    else:
        _counts(figures, period)
        _durations_in_python(figures, period, muted)
    return figures


def _in_period(rule_ids, period):
    return Alert.objects.filter(rule_id__in=rule_ids, fired_at__gte=period.since, fired_at__lt=period.until)


# Triaged: a person acknowledged it, gave a verdict or resolved it (a resolved row with `by`), or reviewed it. Its
# verdict: the latest verdict row that gives one; the alert's own verdict when it has none. Joins on the changes
# grouped once, not a subquery per alert (2 s of correlated look-ups at 90,000 alerts); plain SQL both databases run.
_COUNTS = """
WITH a AS (
    SELECT id, rule_id, run_id, incident_id, reviewed_at, verdict FROM alerts_alert
    WHERE rule_id IN ({rules}) AND fired_at >= %s AND fired_at < %s
), looked AS (
    SELECT DISTINCT c.alert_id FROM alerts_alertchange c JOIN a ON a.id = c.alert_id
    WHERE c.kind IN ('acknowledged', 'verdict') OR (c.kind = 'resolved' AND c.by_id IS NOT NULL)
), verdicts AS (
    SELECT c.alert_id, c.verdict, ROW_NUMBER() OVER (PARTITION BY c.alert_id ORDER BY c.at DESC, c.id DESC) AS n
    FROM alerts_alertchange c JOIN a ON a.id = c.alert_id WHERE c.kind = 'verdict' AND c.verdict <> ''
), judged AS (
    SELECT a.rule_id, a.run_id, a.incident_id, COALESCE(v.verdict, NULLIF(a.verdict, '')) AS given,
           CASE WHEN l.alert_id IS NOT NULL OR a.reviewed_at IS NOT NULL THEN 1 ELSE 0 END AS triaged
    FROM a LEFT JOIN verdicts v ON v.alert_id = a.id AND v.n = 1 LEFT JOIN looked l ON l.alert_id = a.id
)
SELECT rule_id, COUNT(*), COUNT(DISTINCT incident_id), COUNT(DISTINCT run_id), SUM(triaged),
       SUM(CASE WHEN given = 'false_alarm' THEN 1 ELSE 0 END), SUM(CASE WHEN given = 'actionable' THEN 1 ELSE 0 END)
FROM judged GROUP BY rule_id
"""


def _counts(figures, period):
    ops = connection.ops
    rule_ids = list(figures)
    sql = _COUNTS.format(rules=", ".join(["%s"] * len(rule_ids)))
    with connection.cursor() as cursor:
        cursor.execute(sql, [*rule_ids, ops.adapt_datetimefield_value(period.since), ops.adapt_datetimefield_value(period.until)])
        for rule_id, *values in cursor.fetchall():
            f = figures[rule_id]
            f.fires, f.incidents, f.runs, f.triaged, f.false_alarms, f.actionable = (int(v) for v in values)


def _middle(values) -> float | None:
    """The median of `values`, or of the two middle values percentile_disc picked (the same one twice when the
    count is odd: its mean is that value exactly)."""
    return median(values) if values else None


# PostgreSQL: every figure in one query, reading the period's alerts and their changes once. Epoch seconds are numeric
# (exact to the microsecond) on PostgreSQL 14 and later: differences and sums stay exact until the one cast to
# float8, as timedelta arithmetic does in Python.
#
# A median is statistics.median's: the middle value, or the mean of the two middle ones, taken in Python from the
# two percentile_disc picks (0.5 gives the lower middle; 0.5 + 1e-9 the upper one for any count under 500 million).
# percentile_cont would interpolate in float8 and can differ from it in the last digit.
#
# Firing time is the union of the alerts' [fired_at, resolved_at or until) clipped to the period: taken in start
# order, each interval adds only what reaches past every earlier one's end. Those pieces do not overlap and make
# up the union, so the muted part of the firing time is their overlap with the (merged) mutes.
_SQL = """
WITH a AS MATERIALIZED (
    SELECT id, rule_id, run_id, incident_id, fired_at, resolved_at, reviewed_at, verdict FROM alerts_alert
    WHERE rule_id = ANY(%(rules)s) AND fired_at >= %(since)s AND fired_at < %(until)s
), looked AS (
    -- Only changes a person made: an alert with one is triaged.
    SELECT c.alert_id, MIN(c.at) FILTER (WHERE c.kind = 'acknowledged') AS acked,
           (ARRAY_AGG(c.verdict ORDER BY c.at DESC, c.id DESC) FILTER (WHERE c.kind = 'verdict' AND c.verdict <> ''))[1]
               AS given
    FROM alerts_alertchange c
    -- The period's alerts again, not the CTE: the planner knows their number and joins them in one pass (against
    -- the CTE it guessed 200 and looked each of 90,000 alerts up in the index).
    JOIN alerts_alert x ON x.id = c.alert_id AND x.rule_id = ANY(%(rules)s) AND x.fired_at >= %(since)s
                           AND x.fired_at < %(until)s
    WHERE c.kind IN ('acknowledged', 'verdict') OR (c.kind = 'resolved' AND c.by_id IS NOT NULL)
    GROUP BY c.alert_id
), per_rule AS (
    SELECT a.rule_id, COUNT(*) AS fires, COUNT(DISTINCT a.incident_id) AS incidents, COUNT(DISTINCT a.run_id) AS runs,
           COUNT(*) FILTER (WHERE l.alert_id IS NOT NULL OR a.reviewed_at IS NOT NULL) AS triaged,
           COUNT(*) FILTER (WHERE COALESCE(l.given, NULLIF(a.verdict, '')) = 'false_alarm') AS false_alarms,
           COUNT(*) FILTER (WHERE COALESCE(l.given, NULLIF(a.verdict, '')) = 'actionable') AS actionable,
           PERCENTILE_DISC(ARRAY[0.5, 0.500000001]) WITHIN GROUP (
               ORDER BY (EXTRACT(EPOCH FROM l.acked) - EXTRACT(EPOCH FROM a.fired_at))::float8
           ) FILTER (WHERE l.acked IS NOT NULL) AS ack_middles,
           PERCENTILE_DISC(ARRAY[0.5, 0.500000001]) WITHIN GROUP (
               ORDER BY (EXTRACT(EPOCH FROM a.resolved_at) - EXTRACT(EPOCH FROM a.fired_at))::float8
           ) FILTER (WHERE a.resolved_at IS NOT NULL) AS resolve_middles
    FROM a LEFT JOIN looked l ON l.alert_id = a.id
    GROUP BY a.rule_id
), clipped AS (
    SELECT rule_id, GREATEST(fired_at, %(since)s) AS s, LEAST(COALESCE(resolved_at, %(until)s), %(until)s) AS e FROM a
), reached AS (
    SELECT rule_id, s, e, MAX(e) OVER (PARTITION BY rule_id ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
        AS before
    FROM clipped WHERE e > s
), pieces AS (
    SELECT rule_id, GREATEST(s, COALESCE(before, s)) AS s, e FROM reached WHERE e > COALESCE(before, s)
), firing AS (
    SELECT rule_id, SUM(EXTRACT(EPOCH FROM e) - EXTRACT(EPOCH FROM s)) AS secs FROM pieces GROUP BY rule_id
), muted AS (
    SELECT * FROM unnest(%(mute_rules)s::integer[], %(mute_starts)s::timestamptz[], %(mute_ends)s::timestamptz[])
        AS m(rule_id, s, e)
), overlap AS (
    SELECT p.rule_id, SUM(EXTRACT(EPOCH FROM LEAST(p.e, m.e)) - EXTRACT(EPOCH FROM GREATEST(p.s, m.s))) AS secs
    FROM pieces p JOIN muted m ON m.rule_id = p.rule_id AND m.s < p.e AND m.e > p.s GROUP BY p.rule_id
)
SELECT r.rule_id, r.fires, r.incidents, r.runs, r.triaged, r.false_alarms, r.actionable, r.ack_middles,
       r.resolve_middles, COALESCE(f.secs, 0)::float8, COALESCE(o.secs, 0)::float8
FROM per_rule r LEFT JOIN firing f ON f.rule_id = r.rule_id LEFT JOIN overlap o ON o.rule_id = r.rule_id
"""


def _in_sql(figures, period, muted):
    mute_rules, mute_starts, mute_ends = [], [], []
    for rule_id, intervals in muted.items():
        for start, end in intervals:
            mute_rules.append(rule_id)
            mute_starts.append(start)
            mute_ends.append(end)
    with transaction.atomic(), connection.cursor() as cursor:
        # Sorting 90,000 rows fits in memory with some room (the default 4 MB spills them to disk), and JIT
        # compiling this plan costs more than it saves (175 ms of 1.6 s). For this transaction only.
        cursor.execute("SET LOCAL work_mem = '64MB'; SET LOCAL jit = off")
        cursor.execute(_SQL, {"rules": list(figures), "since": period.since, "until": period.until,
                              "mute_rules": mute_rules, "mute_starts": mute_starts, "mute_ends": mute_ends})
        rows = cursor.fetchall()
        cursor.execute("SET LOCAL work_mem TO DEFAULT; SET LOCAL jit TO DEFAULT")
    for rule_id, *counts, ack, resolve, firing, muted_firing in rows:
        f = figures[rule_id]
        f.fires, f.incidents, f.runs, f.triaged, f.false_alarms, f.actionable = counts
        f.median_ack_seconds = _middle(ack)
        f.median_resolve_seconds = _middle(resolve)
        f.firing_seconds, f.muted_while_firing = firing, muted_firing


def _durations_in_python(figures, period, muted):
    alerts = list(_in_period(list(figures), period).order_by().values_list("pk", "rule_id", "fired_at", "resolved_at"))
    first_ack = {}
    for alert_id, at in (AlertChange.objects.filter(alert__in=_in_period(list(figures), period).values("pk"),
                                                    kind=ChangeKind.ACKNOWLEDGED).order_by("at", "pk").values_list("alert_id", "at")):
        first_ack.setdefault(alert_id, at)
    by_rule = {}
    for pk, rule_id, fired_at, resolved_at in alerts:
        by_rule.setdefault(rule_id, []).append((pk, fired_at, resolved_at))
    for rule_id, rows in by_rule.items():
        f = figures[rule_id]
        f.median_ack_seconds = _middle([(first_ack[pk] - fired).total_seconds() for pk, fired, _ in rows if pk in first_ack])
        f.median_resolve_seconds = _middle([(resolved - fired).total_seconds() for _, fired, resolved in rows if resolved])
        firing = union(clip([(fired, resolved or period.until) for _, fired, resolved in rows], period))
        f.firing_seconds = total_seconds(firing)
        f.muted_while_firing = total_seconds(intersection(firing, muted.get(rule_id, [])))
