"""A backtest is a job with a budget: it stops after BACKTEST_MAX_POINTS points or BACKTEST_MAX_SECONDS seconds of
replay and says how far it got; each is a row (who, what, state, result), and a task delivered twice replays once."""
import pytest

from alerts import backtest as backtest_module
from alerts import evaluation
from alerts.models import BacktestJob, BacktestState
from alerts.tasks import run_backtest
from tests.backtest_support import draft, job_of, post

pytestmark = pytest.mark.django_db


def test_a_backtest_past_its_point_budget_is_cut_and_says_which_steps_it_judged(owner, runs, settings):
    # The runs fixture: spiky-a, spiky-b, calm, 400 loss points each in batches of 100.
    settings.BACKTEST_MAX_POINTS = 450
    job = job_of(owner, post(owner, draft()))
    assert job["state"] == "cut"
    result, cut = job["result"], job["result"]["cut"]
    assert (cut["by"], cut["points"], result["points"]) == ("points", 400, 400)
    assert cut["message"].startswith("stopped after 400 points / ")
    assert "(the limit is 450 points); run spiky-a: steps 0–399 judged; run spiky-b: no steps judged; run calm: not judged" \
        in cut["message"]
    # What was judged is reported as usual: spiky-a's spike, and nothing of the runs the budget did not reach.
    assert [(a["run"], a["first_step"]) for a in result["would_fire"]] == [("spiky-a", 300)]


def test_a_backtest_within_its_budget_is_done_and_not_cut(owner, runs, settings):
    settings.BACKTEST_MAX_POINTS = 1200
    job = job_of(owner, post(owner, draft()))
    assert (job["state"], job["result"]["cut"], job["result"]["points"], job["result"]["alerts"]) == ("done", None, 1200, 2)


def test_a_backtest_past_its_time_budget_is_cut_after_the_batches_it_had_time_for(owner, runs, settings, monkeypatch):
    # Each batch "takes" 10 s on the budget's clock: with 20 s, two batches are judged and the third is not.
    settings.BACKTEST_MAX_SECONDS = 20
    now = [1000.0]
    monkeypatch.setattr(backtest_module, "clock", lambda: now[0])
    judge = evaluation._judge

    def slow_judge(*args, **kwargs):
        now[0] += 10
        return judge(*args, **kwargs)

    monkeypatch.setattr(evaluation, "_judge", slow_judge)
    job = job_of(owner, post(owner, draft()))
    cut = job["result"]["cut"]
    assert (job["state"], cut["by"], cut["points"]) == ("cut", "seconds", 200)
    assert cut["message"] == ("stopped after 200 points / 20.0 s (the limit is 20 s); run spiky-a: steps 0–199 judged, "
                              "the rest not; run spiky-b: not judged; run calm: not judged")


def test_each_backtest_is_a_row_saying_who_what_and_how_it_ended(owner, runs):
    job = job_of(owner, post(owner, draft(runs=["spiky-b", "calm"])))
    row = BacktestJob.objects.get(pk=job["id"])
    assert (row.started_by, row.project.slug, row.state, row.rule) == (owner, "pretrain", BacktestState.DONE, None)
    assert row.draft["params"] == {"direction": "above", "width": 6.0} and row.asked == {"runs": ["spiky-b", "calm"]}
    assert row.run_ids == ["spiky-b", "calm"]
    assert row.created_at <= row.started_at <= row.finished_at
    assert (job["started_by"], job["runs"], job["result"]["alerts"]) == ("olivia", ["spiky-b", "calm"], 1)


def test_a_job_delivered_twice_is_replayed_once(owner, runs, monkeypatch):
    monkeypatch.setattr("alerts.tasks.queue_backtest", lambda job_id: True)  # queued, not run yet
    job = job_of(owner, post(owner, draft()))
    assert job["state"] == "queued"
    replays = []
    real = backtest_module.backtest
    monkeypatch.setattr(backtest_module, "backtest", lambda *a, **k: replays.append(1) or real(*a, **k))
    assert run_backtest.delay(job["id"]).get() is True
    finished = BacktestJob.objects.get(pk=job["id"])
    assert run_backtest.delay(job["id"]).get() is False  # the broker delivered it again: the claim is taken
    again = BacktestJob.objects.get(pk=job["id"])
    assert (len(replays), again.state, again.finished_at, again.result) == (1, "done", finished.finished_at, finished.result)


def test_a_backtest_whose_rule_breaks_the_replay_fails_and_says_why(owner, runs, monkeypatch):
    def broken(*args, **kwargs):
        raise MemoryError("out of memory")

    monkeypatch.setattr(backtest_module, "backtest", broken)
    job = job_of(owner, post(owner, draft()))
    assert (job["state"], job["result"], job["error"]) == ("failed", None, "MemoryError: out of memory")


@pytest.mark.parametrize("name, value", [("BACKTEST_MAX_SECONDS", "0"), ("BACKTEST_MAX_POINTS", "lots"),
                                         ("BACKTEST_MAX_PER_PROJECT", "-1")])
def test_a_bad_budget_setting_stops_the_start_with_its_name(name, value, tmp_path):
    from tests.test_settings_fail_loudly import start

    result = start({name: value}, tmp_path)
    assert result.returncode != 0 and name in result.stderr and "ImproperlyConfigured" in result.stderr
