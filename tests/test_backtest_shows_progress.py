"""A running backtest says how far it got: the job counts the runs replayed as it goes, and the page the rule form
polls and the API show "Backtest running: 2 of 3 runs replayed" while the last run is still being replayed."""
import pytest

from alerts import backtest as backtest_module
from alerts.models import BacktestJob
from alerts.tasks import run_backtest
from tests.backtest_support import draft, form, job_of, post
from tests.factories import client_for, make_rule

pytestmark = pytest.mark.django_db


def watch_each_run(monkeypatch, look):
    """Call look(run_id) just before each replay of a run starts, while the job is running."""
    real = backtest_module.replay_run

    def replay_run(rule, run, *args, **kwargs):
        look(run.run_id)
        return real(rule, run, *args, **kwargs)

    monkeypatch.setattr(backtest_module, "replay_run", replay_run)


def test_the_page_and_the_api_show_the_runs_replayed_while_it_runs(owner, runs, monkeypatch):
    monkeypatch.setattr("alerts.tasks.queue_backtest", lambda job_id: True)  # queued; the test is the worker
    job = job_of(owner, post(owner, draft()))
    assert job["progress"] == {"runs_done": 0, "runs": 3, "message": "Backtest queued, waiting for a worker"}
    seen = {}

    def look(run_id):
        page = client_for(owner).get(f"/rules/backtests/{job['id']}/").content.decode()
        api = client_for(owner).get(f"/api/v1/backtests/{job['id']}/").json()
        seen[run_id] = (page, api["state"], api["progress"])

    watch_each_run(monkeypatch, look)
    run_backtest.delay(job["id"])

    page, state, progress = seen["calm"]  # the third run, replayed after spiky-a and spiky-b
    assert state == "running"
    assert progress == {"runs_done": 2, "runs": 3, "message": "Backtest running: 2 of 3 runs replayed"}
    assert "Backtest running: 2 of 3 runs replayed" in page and 'data-poll=' in page
    assert '<progress max="3" value="2"' in page
    assert seen["spiky-a"][2]["message"] == "Backtest running: 0 of 3 runs replayed"
    assert '<progress max="3" value="0"' in seen["spiky-a"][0]
    done = BacktestJob.objects.get(pk=job["id"])
    assert (done.state, done.runs_done, done.runs_total, done.progress) == ("done", 3, 3, "Backtest done: 3 of 3 runs replayed")


def test_a_comparison_counts_a_run_once_both_rules_have_replayed_it(owner, project, runs, monkeypatch):
    monkeypatch.setattr("alerts.tasks.queue_backtest", lambda job_id: True)
    rule = make_rule(project, kind="band", params={"direction": "above", "width": 6.0})
    client_for(owner).post("/rules/backtest/", form(name=rule.name, editing=str(rule.pk)))
    job = BacktestJob.objects.get()
    counted = []
    watch_each_run(monkeypatch, lambda run_id: counted.append((run_id, BacktestJob.objects.get(pk=job.pk).progress)))
    run_backtest.delay(job.pk)
    # Each run is replayed with the draft, then with the saved rule; it counts once both are done.
    assert counted[:4] == [("spiky-a", "Backtest running: 0 of 3 runs replayed with the draft and the saved rule")] * 2 + \
        [("spiky-b", "Backtest running: 1 of 3 runs replayed with the draft and the saved rule")] * 2
