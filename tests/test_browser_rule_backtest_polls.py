"""In Chromium: a backtest that a worker has not finished yet shows its state under the rule form — how many runs it
has replayed while it runs — and its result appears there when the worker is done, without reloading the page (and
under the Content-Security-Policy)."""
import pytest

from alerts import backtest as backtest_module
from alerts.models import BacktestJob
from alerts.tasks import run_backtest
from tests.browser import log_in

pytestmark = [pytest.mark.browser]


def test_the_rule_form_shows_the_result_when_the_worker_is_done(browser, console_server, project, owner, runs, monkeypatch):
    monkeypatch.setattr("alerts.tasks.queue_backtest", lambda job_id: True)  # queued; the test is the worker
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/rules/new/")
    page.fill("#id_name", "loss-band")
    page.select_option("#id_kind", "band")
    page.fill("#id_owner", "Pretrain on-call <#pretrain-oncall>")
    page.click("#rule-json > summary")  # the JSON boxes, as rules-as-code people write a rule
    page.fill("#id_scope", '{"metrics": ["loss"]}')
    page.fill("#id_persistence", '{"points": 3, "resolve_points": 10}')
    page.fill("#id_params", '{"direction": "above", "width": 6}')
    page.fill("#id_diagnostic_url", "https://runbooks.example/loss")
    page.select_option("#id_permitted_response", "notify")
    page.click("#backtest-button")

    page.wait_for_selector("#backtest-result[data-state=queued]")
    assert "Backtest queued" in page.inner_text("#backtest-result")
    url = page.url

    # The test is the worker: before it replays the last run, the form (polling) shows the two it has done.
    real, seen = backtest_module.replay_run, []

    def replay_run(rule, run, *args, **kwargs):
        if run.run_id == "calm":
            page.wait_for_selector("#backtest-result:has-text('Backtest running: 2 of 3 runs replayed')", timeout=30_000)
            seen.append(page.get_attribute("#backtest-result progress", "value"))
        return real(rule, run, *args, **kwargs)

    monkeypatch.setattr(backtest_module, "replay_run", replay_run)
    run_backtest.delay(BacktestJob.objects.get().pk)
    assert seen == ["2"]

    page.wait_for_selector(".backtest-summary", timeout=30_000)
    assert "2 alerts on 2 of 3 runs, 2 pages." in page.inner_text(".backtest-summary")
    assert page.url == url and page.input_value("#id_name") == "loss-band"  # the same form, still filled in
