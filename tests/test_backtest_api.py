"""POST /api/v1/rules/backtest/ starts a backtest of a draft or saved rule over chosen runs (202, then GET its result),
nothing saved; bad input a 400 naming the field."""
import datetime as dt

import pytest
from django.utils import timezone

from alerts.models import Alert, Rule, RuleRevision
from ingest.models import Run
from tests.factories import client_for, make_rule
from tests.backtest_support import URL, backtested, draft, post

pytestmark = pytest.mark.django_db


def test_a_draft_rule_is_backtested_without_saving_it_or_any_alert(owner, runs):
    result = backtested(owner, draft())
    assert [(a["run"], a["first_step"], a["metric"]) for a in result["would_fire"]] == [("spiky-a", 300, "loss"), ("spiky-b", 200, "loss")]
    assert (result["runs"], result["runs_with_alerts"], result["alerts"], result["pages"]) == (3, 2, 2, 2)
    assert all(a["magnitude"] > 6 and a["unit"] == "σ beyond the band" for a in result["would_fire"])
    assert result["rule"] is None
    assert (Rule.objects.count(), RuleRevision.objects.count(), Alert.objects.count()) == (0, 0, 0)
    assert any("wall-clock absence" in limit for limit in result["limits"])
    assert any("mutes" in limit for limit in result["limits"])


def test_an_observe_rule_costs_no_pages(owner, runs):
    result = backtested(owner, draft(permitted_response="observe"))
    assert (result["alerts"], result["pages"]) == (2, 0)


def test_a_wider_band_fires_less_than_a_narrow_one(owner, runs):
    narrow = backtested(owner, draft(params={"direction": "above", "width": 6.0}))
    wide = backtested(owner, draft(params={"direction": "above", "width": 1000.0}))
    assert narrow["alerts"] == 2 and wide["alerts"] == 0


def test_runs_are_chosen_by_ids_tags_and_time(owner, runs):
    assert backtested(owner, draft(runs=["spiky-b", "calm"]))["runs"] == 2
    by_ids = backtested(owner, draft(runs=["spiky-b"]))
    assert [a["run"] for a in by_ids["would_fire"]] == ["spiky-b"]
    by_tags = backtested(owner, draft(tags={"team": "pretrain"}))
    assert (by_tags["runs"], [a["run"] for a in by_tags["would_fire"]]) == (2, ["spiky-a"])
    Run.objects.filter(run_id="spiky-a").update(created_at=timezone.now() - dt.timedelta(days=30),
                                                last_seen_at=timezone.now() - dt.timedelta(days=20))
    recent = backtested(owner, draft(since=(timezone.now() - dt.timedelta(days=1)).isoformat()))
    assert (recent["runs"], [a["run"] for a in recent["would_fire"]]) == (2, ["spiky-b"])
    old = backtested(owner, draft(until=(timezone.now() - dt.timedelta(days=10)).isoformat()))
    assert (old["runs"], [a["run"] for a in old["would_fire"]]) == (1, ["spiky-a"])


def test_a_saved_rule_is_backtested_by_id(owner, runs, project):
    rule = make_rule(project, kind="band", scope={"metrics": ["loss"]})
    result = backtested(owner, {"rule": rule.pk, "runs": ["spiky-a"]})
    assert result["rule"] == rule.pk
    # Saved after the runs were sent: it never fired live, and the backtest shows what it would have.
    assert [(a["run"], a["first_step"]) for a in result["would_fire"]] == [("spiky-a", 300)]
    assert (result["runs"], result["alerts"], Alert.objects.count()) == (1, 1, 0)


def test_a_rule_admin_of_another_project_gets_404_for_a_saved_rule_and_400_for_the_project(
        django_user_model, other_project, runs, project):
    from opsconsole.models import Membership, Role

    stranger = django_user_model.objects.create_user("rhea")
    Membership.objects.create(user=stranger, project=other_project, role=Role.RULE_ADMIN)
    rule = make_rule(project, kind="band")
    assert post(stranger, {"rule": rule.pk}).status_code == 404
    response = post(stranger, draft())
    assert response.status_code == 400 and "project" in response.content.decode()


def test_no_login_is_refused(runs):
    assert post(None, draft()).status_code in (401, 403)


def errors_of(response):
    assert response.status_code == 400, response.content
    return {e["path"].split("[")[0].split(".")[0] for e in response.json()["errors"]}


@pytest.mark.parametrize("body, field", [
    (draft(kind="nope"), "kind"),
    (draft(scope={"metrics": []}), "scope"),
    (draft(params={"direction": "above", "width": -1}), "params"),
    (draft(owner=""), "owner"),
    (draft(persistence={"points": "three"}), "persistence"),
    ({k: v for k, v in draft().items() if k != "name"}, "name"),
    (draft(runs=["no-such-run"]), "runs"),
    (draft(runs=[]), "runs"),
    (draft(runs=[f"r{i}" for i in range(201)]), "runs"),
    (draft(tags=["team"]), "tags"),
    (draft(since="yesterday"), "since"),
    (draft(since="2026-01-02T00:00:00Z", until="2026-01-01T00:00:00Z"), "until"),
    ({"rule": "seven"}, "rule"),
])
def test_bad_input_is_a_400_naming_the_field(owner, runs, body, field):
    assert field in errors_of(post(owner, body))


def test_more_runs_than_a_backtest_replays_is_a_400_on_runs(owner, project, monkeypatch):
    monkeypatch.setattr("alerts.backtest.MAX_RUNS", 2)
    for i in range(3):
        Run.objects.create(project=project, run_id=f"many-{i}")
    assert "runs" in errors_of(post(owner, draft()))


def test_a_saved_rule_of_another_project_named_with_a_project_is_a_400(owner, project, runs):
    rule = make_rule(project, kind="band")
    assert "project" in errors_of(post(owner, {"rule": rule.pk, "project": "vision"}))


def test_the_body_is_json_only(owner, runs):
    response = client_for(owner).post(URL, {"rule": "1"})  # multipart: nested scope and tags have no form encoding
    assert response.status_code == 415


def test_a_saved_rule_whose_stored_settings_do_not_validate_is_a_400_on_rule(owner, project, runs):
    rule = make_rule(project, kind="band")
    Rule.objects.filter(pk=rule.pk).update(params={"width": "wide"})  # as a row stored before validation existed
    assert "rule" in errors_of(post(owner, {"rule": rule.pk}))


def test_a_rule_that_raises_stops_that_runs_replay_and_says_where(owner, runs, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("judge broke")

    monkeypatch.setattr("alerts.evaluation._BandJudge.__call__", broken)
    result = backtested(owner, draft(runs=["spiky-a"]))
    [fault] = result["faults"]
    assert (fault["run"], fault["error"]) == ("spiky-a", "ZeroDivisionError: judge broke")
    assert result["alerts"] == 0
