"""Each flag of the rule report, raised just past its boundary and not at it, with the figure that raised it."""
from datetime import timedelta, timezone as dt_timezone

import pytest
from django.utils import timezone

from alerts.models import ChangeKind, Rule, RuleRevision
from audit.models import LinkCheck
from audit.report import EDITS_FLAG, SILENT_DAYS, Flag, report_rows
from opsconsole.models import Membership, Role
from tests.audit_support import PERIOD, T0, at, change, fire, mute, owned_rule
from tests.factories import make_rule


def flags_of(project, name):
    row = next(r for r in report_rows(project, PERIOD) if r["rule"] == name)
    return {f["flag"]: f["figure"] for f in row["flags"]}


def judged(rule, verdicts, by):
    for i, verdict in enumerate(verdicts):
        change(fire(rule, i + 1, run=f"run-{i}"), ChangeKind.VERDICT, i + 1.5, by=by, verdict=verdict)


@pytest.mark.parametrize(("verdicts", "raised"), [
    (["false_alarm"] * 3 + ["actionable"] * 2, True),  # 60% of 5
    (["false_alarm"] * 4, False),  # 100%, but only 4 verdicts
    (["false_alarm"] * 3 + ["actionable"] * 3, False),  # exactly 50%
])
def test_false_alarm_flag(project, owner, verdicts, raised):
    judged(make_rule(project, "loss-spike"), verdicts, owner)
    figure = flags_of(project, "loss-spike").get(Flag.FALSE_ALARMS)
    assert (figure is not None) == raised
    if raised:
        assert figure == "3 of 5 verdicts false (60%)"


@pytest.mark.parametrize(("mute_hours", "raised"), [(1.5, True), (1, False)])
def test_muted_flag_above_a_quarter_of_the_firing_time(project, mute_hours, raised):
    rule = make_rule(project, "loss-spike")
    fire(rule, 0, resolved=4, reviewed=True)  # 4 h firing
    mute(rule, 0, mute_hours)
    figure = flags_of(project, "loss-spike").get(Flag.MUTED)
    assert (figure is not None) == raised
    if raised:
        assert figure == "muted 38% of its firing time"  # 1.5 h of 4 h


def test_fired_but_never_triaged(project, owner):
    quiet, looked_at, silent = (make_rule(project, n) for n in ("ignored", "looked-at", "never-fired"))
    fire(quiet, 1)
    fire(quiet, 2, resolved=3)  # resolved by the evaluator (no person)
    change(fire(looked_at, 1), ChangeKind.ACKNOWLEDGED, 2, by=owner)
    fire(looked_at, 3)  # one triaged alert is enough
    assert flags_of(project, "ignored")[Flag.NEVER_TRIAGED] == "2 alerts, none triaged"
    assert Flag.NEVER_TRIAGED not in flags_of(project, "looked-at")
    assert Flag.NEVER_TRIAGED not in flags_of(project, "never-fired")


def test_resolved_by_a_person_counts_as_triaged(project, owner):
    rule = make_rule(project, "loss-spike")
    change(fire(rule, 1, resolved=2), ChangeKind.RESOLVED, 2, by=owner)
    assert Flag.NEVER_TRIAGED not in flags_of(project, "loss-spike")


def test_never_fired_in_90_days(project):
    boundary = (PERIOD.until - T0).total_seconds() / 3600 - SILENT_DAYS * 24  # hours after T0 of until - 90 days
    on_the_day, just_before = make_rule(project, "on-the-day"), make_rule(project, "just-before")
    make_rule(project, "never")
    # All three existed through the whole window (a younger rule is not silent: test_silent_flag_needs_history.py).
    Rule.objects.filter(project=project).update(created_at=at(boundary - 24))
    fire(on_the_day, boundary, reviewed=True)
    fire(just_before, boundary - 1 / 3600, reviewed=True)
    assert Flag.SILENT not in flags_of(project, "on-the-day")
    assert flags_of(project, "just-before")[Flag.SILENT] == f"last fired {at(boundary - 1 / 3600).isoformat()}"
    assert flags_of(project, "never")[Flag.SILENT] == "last fired never"


def test_owner_no_longer_a_member_or_inactive(project, owner, outsider, django_user_model):
    outsider.email = "Oscar@Example.org"
    outsider.save()
    gone = django_user_model.objects.create_user("gone", email="gone@example.org", is_active=False)
    Membership.objects.create(user=gone, project=project, role=Role.VIEWER)
    owned_rule(project, "by-username", "olivia")
    owned_rule(project, "by-outsiders-email", "Oscar <oscar@example.org>")
    owned_rule(project, "by-inactive", "gone")
    make_rule(project, "by-team")  # "Pretrain on-call <#pretrain-oncall>" names no user
    assert Flag.OWNER_GONE not in flags_of(project, "by-username")
    assert flags_of(project, "by-outsiders-email")[Flag.OWNER_GONE] == "not a member of this project"
    assert flags_of(project, "by-inactive")[Flag.OWNER_GONE] == "gone is inactive"
    assert Flag.OWNER_GONE not in flags_of(project, "by-team")


def test_diagnostic_link_down_by_the_latest_check(project):
    down, back = make_rule(project, "down"), make_rule(project, "back")
    unchecked = make_rule(project, "unchecked")
    now = timezone.now()
    LinkCheck.objects.create(rule=down, url=down.diagnostic_url, ok=True, status_code=200, checked_at=now - timedelta(hours=1))
    LinkCheck.objects.create(rule=down, url=down.diagnostic_url, ok=False, status_code=503, checked_at=now)
    LinkCheck.objects.create(rule=back, url=back.diagnostic_url, ok=False, error="timeout", checked_at=now - timedelta(hours=1))
    LinkCheck.objects.create(rule=back, url=back.diagnostic_url, ok=True, status_code=200, checked_at=now)
    assert flags_of(project, "down")[Flag.LINK_DOWN] == f"503 at {now.astimezone(dt_timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
    assert Flag.LINK_DOWN not in flags_of(project, "back")
    assert Flag.LINK_DOWN not in flags_of(project, unchecked.name)


@pytest.mark.parametrize(("edits", "raised"), [(EDITS_FLAG, True), (EDITS_FLAG - 1, False)])
def test_edited_many_times_in_the_period(project, edits, raised):
    rule = make_rule(project, "loss-spike")
    for i in range(edits):
        revision = RuleRevision.objects.create(rule=rule, project=project, rule_name=rule.name, action="updated",
                                               snapshot={"params": {"width": i}}, source="test")
        RuleRevision.objects.filter(pk=revision.pk).update(changed_at=at(i + 1))
    figure = flags_of(project, "loss-spike").get(Flag.EDITED_OFTEN)
    assert (figure is not None) == raised
    if raised:
        assert figure == f"{EDITS_FLAG} revisions in the period"


def test_a_mute_past_the_projects_longest_is_flagged_with_who_set_it(project, owner):
    from alerts.models import Mute

    rule = make_rule(project, "loss-spike")
    fire(rule, 1, resolved=2, reviewed=True)
    within = mute(rule, 0, 24, by=owner)
    beyond = mute(rule, 0, 240, by=owner)
    Mute.objects.filter(pk=beyond.pk).update(over_limit=True)  # what alerts/triage.py marks when a rule admin goes past it
    figure = flags_of(project, "loss-spike").get(Flag.MUTED_OVER_LIMIT)
    assert figure == f"mute #{beyond.pk} for 240 h by olivia, over the project's longest mute"
    assert str(within.pk) not in figure
