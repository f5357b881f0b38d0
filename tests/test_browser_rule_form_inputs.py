"""In Chromium: a rule admin writes rules of two kinds through the labelled inputs alone (no JSON), the kind select
showing only that kind's settings, and reads each back in words."""
import pytest

from alerts.models import Rule
from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]


def fill_governance(page, name, kind):
    page.fill("#id_name", name)
    page.select_option("#id_kind", kind)
    page.fill("#id_owner", "Pretrain on-call <#pretrain-oncall>")
    page.fill("#id_diagnostic_url", f"https://runbooks.example/{name}")
    page.select_option("#id_permitted_response", "notify")


def test_a_rule_admin_writes_two_kinds_of_rule_through_the_inputs(browser, console_server, project, owner):
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/rules/new/")
    assert not page.is_visible("#id_scope")  # the JSON boxes wait, closed, under "Advanced"

    fill_governance(page, "grad-band", "band")
    assert page.is_visible("#kind-band") and page.is_visible("#id_param_band_width")
    assert not page.is_visible("#kind-threshold") and not page.is_visible("#id_param_threshold_above")
    assert not page.is_visible("#id_scope_conditions")  # an event rule's
    page.fill("#id_scope_metrics", "grad_norm")
    page.select_option("#id_scope_components", "matching")
    page.fill("#id_scope_component", "blocks.*")
    page.fill("#id_persistence_count", "3")
    page.fill("#id_persistence_resolve_points", "10")
    page.select_option("#id_param_band_direction", "above")
    page.fill("#id_param_band_width", "0")  # not > 0
    page.click("button:has-text('Create rule')")

    page.wait_for_selector("#field-param_band_width .field-error")
    assert page.inner_text("#field-param_band_width .field-error") == (
        "Band settings → width: must be a finite number > 0, not “0”")
    assert page.is_visible("#kind-band") and not page.is_visible("#kind-threshold")  # the kind kept, after the reload
    assert not Rule.objects.exists()
    page.fill("#id_param_band_width", "8")
    page.click("button:has-text('Create rule')")
    page.wait_for_selector("#rule-fired")
    text = page.inner_text("main")
    assert "fires after 3 points in a row; resolves after 10 clear points in a row" in text.lower()
    assert "Width\n8" in page.inner_text("#rule-params") or "Width 8" in page.inner_text("#rule-params")
    screenshot(page, "rule-detail-settings")
    band = Rule.objects.get(name="grad-band")
    assert (band.scope, band.params) == ({"metrics": ["grad_norm"], "component": "blocks.*"},
                                         {"direction": "above", "width": 8})

    page.goto(console_server.url + "/rules/new/")
    fill_governance(page, "loss-high", "threshold")
    assert page.is_visible("#id_param_threshold_above") and not page.is_visible("#id_param_band_width")
    page.select_option("#id_kind", "band")  # and back: the switch follows the select both ways
    assert not page.is_visible("#id_param_threshold_above") and page.is_visible("#id_param_band_width")
    page.select_option("#id_kind", "threshold")
    page.fill("#id_scope_metrics", "loss")
    page.fill("#id_scope_runs", "team=pretrain")
    page.fill("#id_persistence_count", "120")
    page.select_option("#id_persistence_unit", "seconds")
    page.fill("#id_param_threshold_above", "4.5")
    screenshot(page, "rule-form-inputs")
    page.click("button:has-text('Create rule')")
    page.wait_for_selector("#rule-fired")
    assert "a value is above 4.5" in page.inner_text("main")
    threshold = Rule.objects.get(name="loss-high")
    assert (threshold.scope, threshold.persistence, threshold.params) == (
        {"metrics": ["loss"], "runs": {"team": "pretrain"}}, {"seconds": 120}, {"above": 4.5})

    page.click("a:has-text('Edit')")  # the edit page starts from the rule, in the same inputs
    page.wait_for_selector("#id_param_threshold_above")
    assert page.input_value("#id_param_threshold_above") == "4.5" and page.input_value("#id_persistence_count") == "120"
    assert page.is_visible("#id_param_threshold_above") and not page.is_visible("#kind-band")
