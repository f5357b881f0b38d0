"""In Chromium, in a viewer's zone that is not UTC: the pages show times in UTC until the viewer asks, in the
footer, for their local time; the choice is kept across pages and can be taken back."""
from datetime import timedelta
from urllib.parse import urlencode

import pytest

from tests.audit_support import PERIOD
from tests.factories import make_rule

pytestmark = [pytest.mark.browser]

KOLKATA = timedelta(hours=5, minutes=30)  # no daylight saving: the expected local time is fixed


def test_the_footer_toggle_shows_times_in_the_viewers_zone(browser, console_server, project, owner):
    make_rule(project, "loss-spike")
    context = browser.new_context(timezone_id="Asia/Kolkata", viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(console_server.url + "/accounts/login/")
    page.fill("input[name=username]", "olivia")
    page.fill("input[name=password]", "pw-olivia")
    page.click("button[type=submit]")
    page.wait_for_url(console_server.url + "/")
    report = f"{console_server.url}/reports/rules/?{urlencode({'project': 'pretrain', 'until': PERIOD.until.isoformat()})}"
    page.goto(report)
    until = page.locator(f"time[datetime^='{PERIOD.until:%Y-%m-%dT%H:%M:%S}']").first
    utc_text = f"{PERIOD.until:%Y-%m-%d %H:%M:%S} UTC"
    assert until.inner_text() == utc_text

    page.click("#local-time-toggle")
    local = PERIOD.until + KOLKATA
    assert until.inner_text().startswith(f"{local:%Y-%m-%d %H:%M:%S} ")
    assert "UTC" not in until.inner_text()  # the viewer's zone is named instead
    assert page.locator("#local-time-toggle").get_attribute("aria-pressed") == "true"

    page.goto(report)  # kept across pages
    assert page.locator(f"time[datetime^='{PERIOD.until:%Y-%m-%dT%H:%M:%S}']").first.inner_text().startswith(f"{local:%Y-%m-%d %H:%M:%S} ")
    page.click("#local-time-toggle")  # and taken back
    assert page.locator(f"time[datetime^='{PERIOD.until:%Y-%m-%dT%H:%M:%S}']").first.inner_text() == utc_text
    context.close()
