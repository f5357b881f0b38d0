"""The report's "muted" flag (muted more than a quarter of its firing time) rests on some history, as the "silent"
flag does: a rule that fired minutes ago and was muted straight away is "muted 100%" of a few minutes, which says
nothing of the rule. The flag needs an hour of firing time in all and a first alert a day before the period's end."""
from datetime import timedelta

from django.utils import timezone

from alerts.models import Alert, Mute, Rule
from audit.report import Flag, Period, report_rows
from tests.audit_support import PERIOD, fire, mute
from tests.factories import client_for, make_rule


def muted_flag(project, name, period=PERIOD):
    row = next(r for r in report_rows(project, period) if r["rule"] == name)
    return next((f["figure"] for f in row["flags"] if f["flag"] == Flag.MUTED), None)


def test_a_rule_that_fired_minutes_ago_and_was_muted_is_not_flagged_on_the_page(project, owner):
    rule = make_rule(project, "loss-spike")
    now = timezone.now()
    Rule.objects.filter(pk=rule.pk).update(created_at=now - timedelta(minutes=10))
    Alert.objects.filter(pk=fire(rule, 0).pk).update(fired_at=now - timedelta(minutes=6))  # still firing
    Mute.objects.filter(pk=mute(rule, 0, 1).pk).update(created_at=now - timedelta(minutes=5), expires_at=now + timedelta(hours=1))
    html = client_for(owner).get("/reports/rules/", {"project": project.slug}).content.decode()
    assert 'data-rule="loss-spike"' in html
    assert 'data-flag="muted"' not in html
    assert "muted 100% of its firing time" not in html


def test_a_short_firing_time_is_no_finding_however_long_ago(project):
    rule = make_rule(project, "loss-spike")
    fire(rule, 0, resolved=0.25, reviewed=True)  # 15 minutes firing, all of it muted, days before the period's end
    mute(rule, 0, 1)
    assert muted_flag(project, "loss-spike") is None


def test_a_rule_muted_since_it_started_firing_hours_ago_is_not_flagged_yet(project):
    rule = make_rule(project, "loss-spike")
    end = PERIOD.until
    hours = 23  # firing for this long, muted all of it, but first fired under a day ago
    fire(rule, (end - PERIOD.since).total_seconds() / 3600 - hours, reviewed=True)
    mute(rule, (end - PERIOD.since).total_seconds() / 3600 - hours, (end - PERIOD.since).total_seconds() / 3600 + 3)
    assert muted_flag(project, "loss-spike") is None
    # A day and more later the same alerts and mute are a finding.
    later = Period(PERIOD.since, end + timedelta(hours=2))
    assert muted_flag(project, "loss-spike", later) == "muted 100% of its firing time"


def test_enough_firing_time_over_a_day_is_flagged(project):
    rule = make_rule(project, "loss-spike")
    fire(rule, 0, resolved=1, reviewed=True)  # an hour, days before the period's end
    mute(rule, 0, 1)
    assert muted_flag(project, "loss-spike") == "muted 100% of its firing time"
