"""In Chromium: a rule admin fills the rule form, presses Backtest, and reads what it would fire before saving (and,
editing a saved rule, how that compares with the saved rule)."""
import pytest

from alerts.models import Alert, Rule
from tests.browser import log_in, screenshot
from tests.factories import make_rule

pytestmark = [pytest.mark.browser]


def test_a_rule_admin_backtests_a_rule_in_the_form_before_saving_it(browser, console_server, project, owner, runs):
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/rules/new/")
    page.fill("#id_name", "loss-band")
    page.select_option("#id_kind", "band")
    page.fill("#id_owner", "Pretrain on-call <#pretrain-oncall>")
    page.fill("#id_scope_metrics", "loss")
    page.fill("#id_persistence_count", "3")
    page.fill("#id_persistence_resolve_points", "10")
    page.select_option("#id_param_band_direction", "above")
    page.fill("#id_param_band_width", "6")
    page.fill("#id_diagnostic_url", "https://runbooks.example/loss")
    page.select_option("#id_permitted_response", "notify")
    page.click("#backtest-button")

    page.wait_for_selector("#backtest-result")
    summary = page.inner_text(".backtest-summary")
    assert "2 alerts on 2 of 3 runs, 2 pages." in summary and "no prediction" in summary
    cells = page.locator(".backtest-alerts tbody tr td:nth-child(1)").all_inner_texts()
    firsts = page.locator(".backtest-alerts tbody tr td:nth-child(4)").all_inner_texts()
    assert list(zip(cells, firsts)) == [("spiky-a", "300"), ("spiky-b", "200")]
    assert not Rule.objects.exists() and not Alert.objects.exists()
    screenshot(page, "rule-form-backtest")

    page.click("button:has-text('Create rule')")  # the form kept every field: saving it is one click
    page.wait_for_selector("#rule-fired")
    assert Rule.objects.get().name == "loss-band"


def test_backtesting_an_edit_compares_it_with_the_saved_rule(browser, console_server, project, owner, runs):
    rule = make_rule(project, kind="band", scope={"metrics": ["loss"]}, persistence={"points": 3, "resolve_points": 10},
                     params={"direction": "above", "width": 6.0})
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + f"/rules/{rule.pk}/edit/")
    page.fill("#id_scope_runs", "team=pretrain")  # spiky-b is another team's run
    page.click("#backtest-button")

    page.wait_for_selector(".backtest-comparison")
    assert page.inner_text(".backtest-comparison") == (
        f"Compared with the saved rule {rule.name}: Draft: 1 alert on 1 of 3 runs, 1 page — saved rule: 2 alerts on "
        "2 of 3 runs, 2 pages (1 fewer alert, 1 fewer page; run spiky-b no longer alerts)")
    rule.refresh_from_db()
    assert rule.scope == {"metrics": ["loss"]}  # a backtest saves nothing
