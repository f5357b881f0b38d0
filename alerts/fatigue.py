"""The rules to fix first: pages judged false, counted per rule.

A page is an alert of a rule whose permitted response is notify or review (someone is called to look);
a page judged false is one whose verdict (the alert's latest, kept on the alert) is false_alarm. Here in
alerts so the rules list can order by it; the audit app reuses it (alerts never import audit).
"""
from django.db.models import Count

from alerts.models import Alert, PermittedResponse, Verdict

PAGING_RESPONSES = (PermittedResponse.NOTIFY, PermittedResponse.REVIEW)


def false_pages_by_rule(rules, *, since=None, until=None) -> dict[int, int]:
    """{rule pk: pages judged false}, for paging rules among `rules` with at least one (fired in [since, until))."""
    alerts = Alert.objects.filter(rule__in=[r.pk for r in rules if r.permitted_response in PAGING_RESPONSES],
                                  verdict=Verdict.FALSE_ALARM)
    if since is not None:
        alerts = alerts.filter(fired_at__gte=since)
    if until is not None:
        alerts = alerts.filter(fired_at__lt=until)
    return dict(alerts.values("rule").annotate(n=Count("pk")).values_list("rule", "n"))


def rules_to_fix_first(rules, *, since=None, until=None, limit=10) -> list[tuple]:
    """(rule, pages judged false) for the rules that cost any, most first (then by name)."""
    counts = false_pages_by_rule(rules, since=since, until=until)
    ranked = sorted((r for r in rules if counts.get(r.pk)), key=lambda r: (-counts[r.pk], r.name))
    return [(r, counts[r.pk]) for r in ranked[:limit]]
