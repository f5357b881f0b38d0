"""In Chromium: a member opens the rule report (flags highlighted, CSV/JSON/printable links), the printable page
and the fatigue page, whose Plotly charts draw under the Content-Security-Policy."""
from urllib.parse import urlencode

import pytest

from alerts.models import ChangeKind
from tests.audit_support import PERIOD, change, fire, mute
from tests.browser import log_in, screenshot
from tests.factories import make_rule

pytestmark = [pytest.mark.browser]
QUERY = urlencode({"project": "pretrain", "since": PERIOD.since.isoformat(), "until": PERIOD.until.isoformat()})


def history(project, owner):
    spike = make_rule(project, "loss-spike")
    grad = make_rule(project, "grad-high", kind="threshold", response="review")
    for i in range(6):
        alert = fire(spike, 2 + 20 * i, run=f"run-{i}", resolved=3 + 20 * i)
        change(alert, ChangeKind.ACKNOWLEDGED, 2.2 + 20 * i, by=owner)
        change(alert, ChangeKind.VERDICT, 2.5 + 20 * i, by=owner, verdict="false_alarm" if i < 4 else "actionable")
    fire(grad, 30, resolved=50)
    mute(grad, 29, 60)


def test_the_report_and_the_fatigue_page(browser, console_server, project, owner):
    history(project, owner)
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{console_server.url}/reports/rules/?{QUERY}")
    page.wait_for_selector("#report-table")
    spike = page.locator("tr[data-rule='loss-spike']")
    assert "flagged" in spike.get_attribute("class")
    assert spike.locator("[data-flag='false_alarms']").inner_text() == "false alarms: 4 of 6 verdicts false (67%)"
    grad = page.locator("tr[data-rule='grad-high']")
    assert grad.locator("[data-flag='never_triaged']").count() == 1 and grad.locator("[data-flag='muted']").count() == 1
    screenshot(page, "audit-report")

    page.click("#report-print")
    page.wait_for_selector("body.printable #report-table")
    assert page.locator("header nav").count() == 0
    screenshot(page, "audit-report-print")

    page.goto(f"{console_server.url}/reports/fatigue/?{QUERY}")
    page.wait_for_selector("#fatigue-volume .main-svg")
    page.wait_for_selector("#fatigue-actionable .main-svg")
    assert page.locator(".sparkline:has(.main-svg)").count() == 2
    assert [li.get_attribute("data-rule") for li in page.locator("#fix-first li").all()] == ["loss-spike"]
    screenshot(page, "fatigue")
    assert errors == []
