"""Every figure of the rule report on a made-up history, checked exactly (docs in audit/report.py)."""
import pytest

from alerts.models import ChangeKind, Mute, MuteEndReason, RuleRevision
from audit.report import report_rows, wilson
from tests.audit_support import PERIOD, at, change, fire, incident, mute, owned_rule
from tests.factories import make_rule


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, method 3 (Wilson).
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
])
def test_the_wilson_interval_matches_the_published_values(k, n, low, high):
    got = wilson(k, n)
    assert (round(got[0], 4), round(got[1], 4)) == (low, high)


def test_no_verdicts_no_interval():
    assert wilson(0, 0) is None


@pytest.fixture
def history(project, owner):
    rule = make_rule(project, "loss-spike")
    first = incident("run-a", project, 1)
    a1 = fire(rule, 1, run="run-a", resolved=3, incident=first)
    a2 = fire(rule, 2, run="run-a", resolved=6, incident=first)
    a3 = fire(rule, 10, run="run-b")  # still firing at the period's end
    fire(rule, 20, run="run-b", resolved=21)  # resolved by the evaluator: nobody triaged it
    fire(rule, -5, run="run-a", resolved=-4)  # before the period
    fire(rule, 168, run="run-c")  # at `until`: after the period
    change(a1, ChangeKind.ACKNOWLEDGED, 1.5, by=owner)
    change(a1, ChangeKind.VERDICT, 2, by=owner, verdict="false_alarm")
    change(a1, ChangeKind.VERDICT, 2.5, by=owner, verdict="actionable")  # the latest verdict counts
    change(a2, ChangeKind.ACKNOWLEDGED, 2.25, by=owner)
    change(a2, ChangeKind.ACKNOWLEDGED, 3, by=owner)  # only the first acknowledgement counts
    change(a2, ChangeKind.VERDICT, 4, by=owner, verdict="false_alarm")
    change(a3, ChangeKind.VERDICT, 11, by=owner, verdict="false_alarm")
    mute(rule, -10, 2)  # began before the period
    mute(rule, 0, 4)
    mute(rule, 3, 24, ended=12, by=owner)  # overlaps the one before; ended 12 h early
    mute(rule, -50, -20)  # over before the period
    mute(rule, 200, 300)  # after it
    for hours, snapshot in ((5, {"a": 1, "b": 2}), (6, {"a": 1, "b": 3, "c": 1})):
        revision = RuleRevision.objects.create(rule=rule, project=project, rule_name=rule.name, action="updated",
                                               snapshot=snapshot, source="test", changed_by=owner)
        RuleRevision.objects.filter(pk=revision.pk).update(changed_at=at(hours))
    return rule


def test_fires_incidents_and_alerts_per_run(history, project):
    [row] = report_rows(project, PERIOD)
    assert (row["fires"], row["incidents"], row["runs"], row["alerts_per_run"]) == (4, 1, 2, 2.0)


def test_share_triaged_counts_acknowledged_verdict_and_reviewed_alerts(history, project):
    [row] = report_rows(project, PERIOD)
    assert (row["triaged"], row["share_triaged"]) == (3, 0.75)


def test_false_alarm_rate_uses_each_alerts_latest_verdict(history, project):
    [row] = report_rows(project, PERIOD)
    assert (row["verdicts"], row["false_alarms"], row["actionable"]) == (3, 2, 1)
    assert row["false_alarm_rate"] == 2 / 3 and row["actionable_rate"] == 1 / 3
    assert (row["false_alarm_low"], row["false_alarm_high"]) == wilson(2, 3)
    assert (round(row["false_alarm_low"], 4), round(row["false_alarm_high"], 4)) == (0.2077, 0.9385)


def test_medians_of_time_to_acknowledge_and_to_resolve(history, project):
    [row] = report_rows(project, PERIOD)
    assert row["median_ack_seconds"] == (1800 + 900) / 2  # 30 min and 15 min
    assert row["median_resolve_seconds"] == 7200  # of 2 h, 4 h and 1 h


def test_muted_share_with_overlapping_mutes(history, project):
    [row] = report_rows(project, PERIOD)
    # Mutes within the period: [0, 2) ∪ [0, 4) ∪ [3, 12) = [0, 12): 12 h. Firing: [1, 6) ∪ [10, 168) = 163 h,
    # of which [1, 6) and [10, 12) were muted: 7 h.
    assert (row["mutes"], row["muted_hours"], row["firing_hours"]) == (3, 12.0, 163.0)
    assert row["muted_share"] == 7 / 163


def test_mutes_ended_early_and_by_whom(history, project):
    [row] = report_rows(project, PERIOD)
    [early] = row["mutes_ended_early"]
    assert (early["ended_at"], early["expires_at"]) == (at(12).isoformat(), at(24).isoformat())
    assert early["ended_by"] == "olivia"


def test_last_fired_and_the_revisions_with_what_changed(history, project):
    [row] = report_rows(project, PERIOD)
    assert row["last_fired"] == at(20).isoformat()
    assert [(r["at"], r["changed"], r["by"]) for r in row["revisions"]] == [
        (at(5).isoformat(), [], "olivia"), (at(6).isoformat(), ["b", "c"], "olivia")]


def test_owner_filter_keeps_only_that_owners_rules(history, project):
    owned_rule(project, "grad-high", "someone-else", kind="threshold")
    assert [r["rule"] for r in report_rows(project, PERIOD)] == ["grad-high", "loss-spike"]
    assert [r["rule"] for r in report_rows(project, PERIOD, owner="someone-else")] == ["grad-high"]


def test_a_mute_the_sweep_ended_unused_is_not_ended_early(project):
    rule = owned_rule(project, "quiet-rule", "olivia")
    unused = mute(rule, 0, 48)
    Mute.objects.filter(pk=unused.pk).update(ended_at=at(30), end_reason=MuteEndReason.UNUSED)
    [row] = report_rows(project, PERIOD)
    assert row["mutes_ended_early"] == []
