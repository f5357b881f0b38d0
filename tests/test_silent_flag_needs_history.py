"""The report's "silent" flag is raised only on a rule that existed through the whole window and did not fire in it:
a rule younger than the window has not had the time to fire, so "last fired never" says nothing of it."""
from datetime import timedelta

from django.utils import timezone

from alerts.models import Rule
from audit.report import SILENT_DAYS, Flag, Period, report_rows
from tests.factories import client_for, make_rule


def silent_rules(project, until):
    rows = report_rows(project, Period(until - timedelta(days=7), until))
    return {r["rule"] for r in rows if any(f["flag"] == Flag.SILENT for f in r["flags"])}


def aged(project, name, days):
    rule = make_rule(project, name)
    Rule.objects.filter(pk=rule.pk).update(created_at=timezone.now() - timedelta(days=days))
    return rule


def test_a_rule_created_minutes_ago_is_not_flagged_silent_on_the_page(project, owner):
    make_rule(project, "fresh-rule")
    Rule.objects.filter(name="fresh-rule").update(created_at=timezone.now() - timedelta(minutes=6))
    page = client_for(owner).get("/reports/rules/", {"project": project.slug})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-rule="fresh-rule"' in html
    assert 'data-flag="silent"' not in html
    assert "last fired never" not in html


def test_only_a_rule_that_existed_through_the_window_and_never_fired_is_silent(project):
    now = timezone.now()
    aged(project, "younger", SILENT_DAYS - 1)
    aged(project, "old-enough", SILENT_DAYS + 1)
    assert silent_rules(project, now) == {"old-enough"}
    # The same rules judged at a moment before the old one was 90 days old: neither is silent yet.
    assert silent_rules(project, now - timedelta(days=2)) == set()


def test_a_rule_created_after_the_period_is_not_silent_in_it(project):
    aged(project, "later", 0)
    assert silent_rules(project, timezone.now() - timedelta(days=200)) == set()
