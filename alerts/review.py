"""Sticky hard invariants, and alerts that ended with nobody's word on them.

A hard invariant (a non-finite value, missing data: governance.HARD_INVARIANT_KINDS)
that fired and cleared by itself is not over: a single NaN loss followed by
finite points is still a NaN in the run. Its alert resolves as any other does
(the condition cleared), but until a person acknowledges it, gives a verdict or
resolves it by hand (`Alert.reviewed_at`, set by alerts/triage.py) it stays in
the inbox's default view and its run shows "needs review". So does any rule whose
persistence says `until_reviewed` (governance.sticky): an event whose damage outlasts
its signal, such as the optimizer's abnormal update (the starter `update-surge`).

Every other alert that resolved by itself and has no verdict is counted under
"resolved, no verdict": the alerts nobody judged, which a false-alarm rate must
not silently drop.
"""
from django.db.models import Exists, OuterRef, Q

from alerts.governance import HARD_INVARIANT_KINDS, sticky
from alerts.models import Alert, AlertChange, AlertState, ChangeKind


def needs_review_q(prefix: str = "") -> Q:
    """Alerts of hard-invariant rules whose condition cleared and that no person has looked at yet.

    `prefix` reaches the alert through a relation ("alerts__" from a run).
    """
    # has_key first: a JSON key that is absent compares as NULL, which would make exclude() drop every row.
    opted_in = Q(**{f"{prefix}rule__persistence__has_key": "until_reviewed"}) & Q(**{f"{prefix}rule__persistence__until_reviewed": True})
    sticky_rule = Q(**{f"{prefix}rule__kind__in": HARD_INVARIANT_KINDS}) | opted_in
    return sticky_rule & Q(**{
        f"{prefix}state": AlertState.RESOLVED,
        f"{prefix}reviewed_at__isnull": True,
    })


def needs_review(alert) -> bool:
    """In Python, what needs_review_q says in SQL (`alert.rule` loaded)."""
    return sticky(alert.rule) and alert.state == AlertState.RESOLVED and alert.reviewed_at is None


def resolved_by_a_person():
    """An Exists() for annotating alerts: a person resolved it (a RESOLVED row with `by`)."""
    return Exists(AlertChange.objects.filter(alert=OuterRef("pk"), kind=ChangeKind.RESOLVED, by__isnull=False))


def resolved_no_verdict(alerts):
    """Of `alerts`, those that resolved by themselves and have no verdict, other than the ones needing review."""
    return (
        alerts.filter(state=AlertState.RESOLVED, verdict__isnull=True)
        .exclude(needs_review_q())
        .exclude(resolved_by_a_person())
    )


def unreviewed_q(prefix: str = "") -> Q:
    """Alerts that ended with no person's word at all: no verdict, never acknowledged, never resolved by hand and
    no decision naming them or their incident (reviews/lifecycle.py marks those reviewed).

    Wider than needs_review_q: any rule's alert, not only hard invariants. It does not keep the alert in the
    inbox's list (false alarms would pile up there), but its run is never shown as plainly healthy.
    """
    return Q(**{f"{prefix}state": AlertState.RESOLVED, f"{prefix}reviewed_at__isnull": True,
                f"{prefix}verdict__isnull": True})


def unreviewed(alert) -> bool:
    """In Python, what unreviewed_q says in SQL."""
    return alert.state == AlertState.RESOLVED and alert.reviewed_at is None and alert.verdict is None


def run_ids_needing_review(alerts) -> list[str]:
    """The run ids, sorted, of the runs of `alerts` (a queryset) with an alert that needs review or ended with
    nobody's word on it: what the inbox page, its API and its live frames list as "needs review"."""
    # Distinct in SQL: a project's unreviewed alerts grow by the thousand, its runs needing review do not.
    return sorted(alerts.filter(needs_review_q() | unreviewed_q()).order_by().values_list("run__run_id", flat=True).distinct())


def runs_needing_review(runs) -> set[int]:
    """The pks of `runs` (a queryset or pks) with an alert that needs review or ended with nobody's word on it."""
    return set(
        Alert.objects.filter(needs_review_q() | unreviewed_q(), run__in=runs).order_by().values_list("run_id", flat=True).distinct()
    )
