"""In Chromium: on-call works the inbox with its plain forms (no script needed); a viewer sees it read-only."""
import pytest

from alerts.models import Alert, AlertChange, Mute
from opsconsole.models import Membership, Role
from tests.browser import log_in, screenshot
from tests.factories import make_alert, make_rule

pytestmark = [pytest.mark.browser]


@pytest.fixture
def alerts(console_server, project, owner, teammate):
    rule = make_rule(project, kind="nonfinite")
    spike = make_rule(project, name="loss-spike", kind="threshold", scope={"metrics": ["loss"]}, response="review")
    return {
        "nan": make_alert(rule, "llama-ft-7", "layers.3"),
        "spike": make_alert(spike, "llama-ft-7", "", magnitude=4.2),
        "other": make_alert(rule, "llama-ft-8", "layers.0", state="acknowledged"),
    }


def row(page, alert):
    return page.locator(f'tr[data-alert-id="{alert.pk}"]')


def test_on_call_acknowledges_gives_a_verdict_and_mutes_from_the_inbox(browser, console_server, alerts, owner):
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.click("header nav >> text=Inbox")
    page.wait_for_selector("#inbox-table")
    assert page.locator("tr.inbox-row").count() == 3
    screenshot(page, "inbox")

    nan = alerts["nan"]
    row(page, nan).locator('button[data-action="acknowledge"]').click()
    page.wait_for_selector("#inbox-messages")
    assert "Acknowledged grad-nonfinite" in page.inner_text("#inbox-messages")
    assert row(page, nan).get_attribute("data-state") == "acknowledged"

    # A false alarm without a note: the error sits beside the note, the panel stays open.
    row(page, nan).locator('summary[data-action="verdict"]').click()
    page.check(f"#verdict-{nan.pk}-false_alarm")
    page.click(f"#verdict-{nan.pk}-submit")
    page.wait_for_selector(f"#verdict-{nan.pk}-note-error")
    assert "a note is required for a false alarm" in page.inner_text(f"#verdict-{nan.pk}-note-error")
    assert page.is_visible(f"#verdict-{nan.pk}-note")
    screenshot(page, "inbox-verdict-error")
    page.fill(f"#verdict-{nan.pk}-note", "the eval loader restarted; the model is fine")
    page.click(f"#verdict-{nan.pk}-submit")
    page.wait_for_selector("#inbox-messages")
    assert "false alarm" in page.inner_text("#inbox-messages")

    spike = alerts["spike"]
    row(page, spike).locator('summary[data-action="mute"]').click()
    page.select_option(f"#mute-{spike.pk}-scope", "run")
    page.fill(f"#mute-{spike.pk}-reason", "known bad shard, being re-tokenised")
    page.select_option(f"#mute-{spike.pk}-duration", "240")
    screenshot(page, "inbox-mute-form")
    page.click(f"#mute-{spike.pk}-submit")
    page.wait_for_selector("#inbox-messages")
    assert row(page, spike).get_attribute("data-state") == "muted"

    assert Alert.objects.get(pk=nan.pk).verdict == "false_alarm"
    assert Mute.objects.get().created_by == owner
    assert list(AlertChange.objects.filter(by=owner).values_list("kind", flat=True)) == ["acknowledged", "verdict", "muted"]
    screenshot(page, "inbox-after")


def test_a_viewer_sees_the_inbox_without_buttons(browser, console_server, alerts, teammate):
    page = log_in(browser, console_server, "tariq", "pw-tariq")
    page.goto(console_server.url + "/inbox/")
    page.wait_for_selector("#inbox-table")
    assert page.locator("tr.inbox-row").count() == 3
    assert page.locator("[data-action]").count() == 0


def test_an_on_call_of_another_project_sees_none_of_it(browser, console_server, alerts, outsider):
    page = log_in(browser, console_server, "oscar", "pw-oscar")
    page.goto(console_server.url + "/inbox/")
    assert page.is_visible("#inbox-empty")
    assert Membership.objects.get(user=outsider).role == Role.ONCALL


def test_a_new_alert_appears_in_the_open_inbox_without_a_reload(browser, console_server, project, owner, token):
    import httpx

    from alerts.starter import install_starter_pack

    install_starter_pack(project)
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/inbox/")
    page.wait_for_selector('body[data-live="open"]', timeout=10000)
    assert page.locator("#inbox-table tr[data-alert-id]").count() == 0
    points = [{"step": s, "metric": "loss", "value": "NaN" if s == 5 else 2.0} for s in range(10)]
    response = httpx.post(console_server.url + "/api/v1/ingest", json={"run": {"id": "live-run"}, "points": points},
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 202
    # It arrives as its incident's row (its one alert beneath it, shown when expanded).
    page.wait_for_selector("#inbox-table tr[data-incident-id]", timeout=10000)
    assert "nonfinite-loss" in page.locator("#inbox-table tbody").inner_text()
    assert page.locator("#inbox-table tr[data-alert-id]").count() == 1
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1
