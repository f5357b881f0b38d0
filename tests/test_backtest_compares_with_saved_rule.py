"""Backtesting an edit of a saved rule compares the draft with the saved rule: both are replayed over the same runs,
and the result says, per figure, the draft against the saved rule and which runs gain or lose alerts."""
import pytest

from alerts.models import BacktestJob
from alerts.tasks import run_backtest
from tests.backtest_support import draft, form, job_of, post
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db

# The runs fixture: spiky-a (team pretrain) and spiky-b (team vision) each have one spike; calm has none.
PRETRAIN_ONLY = {"metrics": ["loss"], "runs": {"team": "pretrain"}}


@pytest.fixture
def saved(project):
    """The saved rule: the loss band over every run, firing on both spiky runs."""
    return make_rule(project, kind="band", scope={"metrics": ["loss"]}, persistence={"points": 3, "resolve_points": 10},
                     params={"direction": "above", "width": 6.0})


def test_a_draft_that_fires_less_says_how_much_less_and_which_run_stops_alerting(owner, runs, saved):
    body = draft(name=saved.name, scope=PRETRAIN_ONLY, compare_with=saved.pk)
    job = job_of(owner, post(owner, body))
    result, compared = job["result"], job["result"]["compared"]
    assert job["compared_with"] == saved.pk
    assert (result["alerts"], result["runs_with_alerts"]) == (1, 1)  # the draft's own figures, as before
    assert compared["draft"] == {"alerts": 1, "runs_with_alerts": 1, "pages": 1}
    assert {k: compared["saved"][k] for k in ("alerts", "runs_with_alerts", "pages")} == \
        {"alerts": 2, "runs_with_alerts": 2, "pages": 2}
    assert compared["change"] == {"alerts": -1, "runs_with_alerts": -1, "pages": -1}
    assert compared["runs_losing"] == [{"run": "spiky-b", "draft": 0, "saved": 1}] and compared["runs_gaining"] == []
    assert [(a["run"], a["first_step"]) for a in compared["saved"]["would_fire"]] == [("spiky-a", 300), ("spiky-b", 200)]
    assert compared["message"] == ("Draft: 1 alert on 1 of 3 runs, 1 page — saved rule: 2 alerts on 2 of 3 runs, 2 pages "
                                   "(1 fewer alert, 1 fewer page; run spiky-b no longer alerts)")
    assert (compared["rule"], compared["runs"], compared["complete"]) == (saved.pk, ["spiky-a", "spiky-b", "calm"], True)


def test_the_rule_form_shows_the_comparison_when_editing_a_saved_rule(owner, runs, saved):
    html = client_for(owner).post("/rules/backtest/", form(
        name=saved.name, editing=str(saved.pk), scope='{"metrics": ["loss"], "runs": {"team": "pretrain"}}',
        permitted_response="review")).content.decode()
    assert "Compared with the saved rule" in html and f'href="/rules/{saved.pk}/"' in html
    # review pages like notify: the pages follow the alerts
    assert ("Draft: 1 alert on 1 of 3 runs, 1 page — saved rule: 2 alerts on 2 of 3 runs, 2 pages "
            "(1 fewer alert, 1 fewer page; run spiky-b no longer alerts)") in html


def test_a_draft_that_pages_nobody_and_fires_more_says_so(owner, runs, project):
    quiet = make_rule(project, name="loss-quiet", kind="band", scope=PRETRAIN_ONLY,
                      persistence={"points": 3, "resolve_points": 10}, params={"direction": "above", "width": 6.0})
    job = job_of(owner, post(owner, draft(name=quiet.name, permitted_response="observe", compare_with=quiet.pk)))
    compared = job["result"]["compared"]
    assert compared["runs_gaining"] == [{"run": "spiky-b", "draft": 1, "saved": 0}]
    assert compared["message"] == ("Draft: 2 alerts on 2 of 3 runs, 0 pages — saved rule: 1 alert on 1 of 3 runs, 1 page "
                                   "(1 more alert, 1 fewer page; run spiky-b newly alerts (1 alert))")


def test_the_saved_rule_is_compared_as_it_was_when_the_backtest_started(owner, runs, saved, monkeypatch):
    monkeypatch.setattr("alerts.tasks.queue_backtest", lambda job_id: True)
    job = job_of(owner, post(owner, draft(name=saved.name, scope=PRETRAIN_ONLY, compare_with=saved.pk)))
    saved.scope = PRETRAIN_ONLY  # saved before the worker got to the backtest: the draft is now the saved rule
    saved.save()
    run_backtest.delay(job["id"])
    compared = BacktestJob.objects.get(pk=job["id"]).result["compared"]
    assert compared["change"]["alerts"] == -1


def test_a_new_rule_is_compared_with_nothing(owner, runs):
    job = job_of(owner, post(owner, draft()))
    assert (job["compared_with"], job["result"]["compared"]) == (None, None)
    html = client_for(owner).post("/rules/backtest/", form()).content.decode()
    assert "Not compared: this draft edits no saved rule." in html and "Compared with the saved rule" not in html


def test_compare_with_names_a_saved_rule_of_the_drafts_project_for_a_draft_only(owner, runs, saved, other_project):
    elsewhere = make_rule(other_project, kind="band")
    response = post(owner, draft(compare_with=elsewhere.pk))
    assert response.status_code == 400
    assert response.json()["errors"] == [{"path": "compare_with", "message": f"no rule {elsewhere.pk} in project pretrain"}]
    response = post(owner, {"rule": saved.pk, "compare_with": saved.pk})
    assert response.status_code == 400 and "compared with nothing" in response.json()["errors"][0]["message"]
    assert not BacktestJob.objects.exists()


def test_a_comparison_cut_by_the_budget_compares_the_runs_both_rules_were_judged_on(owner, runs, saved, settings):
    # Both rules spend one budget: spiky-a costs 400 points twice; the draft skips spiky-b (another team) and the
    # saved rule gets 200 of its steps before the budget runs out, so spiky-b is not compared.
    settings.BACKTEST_MAX_POINTS = 1000
    job = job_of(owner, post(owner, draft(name=saved.name, scope=PRETRAIN_ONLY, compare_with=saved.pk)))
    compared = job["result"]["compared"]
    assert (job["state"], job["progress"]["runs_done"], compared["runs"], compared["complete"]) == ("cut", 1, ["spiky-a"], False)
    assert compared["message"] == ("On the 1 run both were judged on (the budget ran out): Draft: 1 alert on 1 of 1 run, "
                                   "1 page — saved rule: 1 alert on 1 of 1 run, 1 page (as many alerts; the same number "
                                   "of alerts on every run)")
