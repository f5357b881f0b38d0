"""In Chromium: a rule admin writes a rule with the plain form (no script), is stopped by a missing governance field, and reads it back."""
import pytest

from alerts.models import Rule, RuleRevision
from tests.browser import log_in, screenshot
from tests.factories import make_rule

pytestmark = [pytest.mark.browser]


def test_a_rule_admin_creates_a_rule_through_the_console_form(browser, console_server, project, owner):
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.click("header nav >> text=Rules")
    page.wait_for_selector("h1:has-text('Alert rules')")
    page.click("text=New rule")
    page.fill("#id_name", "grad-explosion")
    page.select_option("#id_kind", "band")
    page.fill("#id_scope_metrics", "grad_norm")
    page.fill("#id_persistence_count", "3")
    page.fill("#id_persistence_resolve_points", "10")
    page.select_option("#id_param_band_direction", "above")
    page.fill("#id_param_band_width", "10")
    page.fill("#id_diagnostic_url", "https://runbooks.example/grad")
    page.select_option("#id_permitted_response", "notify")
    page.click("button:has-text('Create rule')")  # no owner yet

    page.wait_for_selector("#field-owner .field-error")
    assert "Owner is required" in page.inner_text("#field-owner .field-error")
    assert not Rule.objects.exists()
    screenshot(page, "rule-form-error")

    page.fill("#id_owner", "Pretrain on-call <#pretrain-oncall>")
    page.click("button:has-text('Create rule')")
    page.wait_for_selector("#rule-fired")
    text = page.inner_text("main")
    assert "fires after 3 points in a row; resolves after 10 clear points in a row" in text.lower()
    assert "Rule grad-explosion created." in text
    revision = RuleRevision.objects.get()
    assert (revision.source, revision.changed_by_id) == ("console", owner.pk)
    screenshot(page, "rule-detail")


def test_a_viewer_reads_rules_without_edit_controls(browser, console_server, project, teammate):
    rule = make_rule(project)
    page = log_in(browser, console_server, "tariq", "pw-tariq")
    page.goto(console_server.url + "/rules/")
    assert page.locator("text=New rule").count() == 0
    page.click(f"a[href='/rules/{rule.pk}/']")
    page.wait_for_selector("#rule-fired")
    assert page.locator("a:has-text('Edit')").count() == 0 and page.locator("a:has-text('Delete')").count() == 0
    screenshot(page, "rule-detail-viewer")
