"""In Chromium, under the Content-Security-Policy: a rule admin adds a signed webhook channel through the form and
sends a test message to a receiver that refuses it; then a job's incident fails to reach it too. The failures
show where on-call looks (the channel's delivery log with the receiver's answer, a banner on the channels list)
and the secret never comes back."""
import httpx
import pytest

from notifications.models import Channel
from tests.browser import log_in, screenshot
from tests.notify_support import grad_points, spike_rule

pytestmark = [pytest.mark.browser]
SECRET = "whsec-browser-test-9f1c"


def test_a_rule_admin_adds_a_channel_and_sees_a_failed_delivery(browser, console_server, project, owner, token, receiver):
    receiver.statuses = [404, 404]  # the receiver's URL is wrong: each try fails at once, no retry
    spike_rule(project)
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    page.goto(f"{console_server.url}/channels/")
    page.click("text=New channel")
    page.select_option("#id_project", project.slug)
    page.fill("#id_name", "team-hook")
    page.select_option("#id_kind", "webhook")
    page.fill("#id_url", receiver.url + "/hooks/wrong")
    page.fill("#id_secret", SECRET)
    page.click("button[type=submit]:has-text('Save')")
    page.wait_for_selector("h1:has-text('team-hook')")
    assert Channel.objects.get(name="team-hook").secret == SECRET
    assert SECRET not in page.content() and "set (never shown)" in page.inner_text("dl.kv")

    page.click("#send-test")
    page.wait_for_selector("table.deliveries")
    assert "failed: HTTP 404" in page.inner_text(".flash")
    row = page.locator("table.deliveries tbody tr").first
    assert "delivery-failed" in row.get_attribute("class")
    assert row.locator("td.num").nth(1).inner_text() == "404"
    assert [r["path"] for r in receiver.requests] == ["/hooks/wrong"]
    assert receiver.requests[0]["headers"]["X-WarningLight-Signature"].startswith("sha256=")

    # A job's gradient spikes: the incident is routed to the channel, and its delivery fails too.
    answer = httpx.post(f"{console_server.url}/api/v1/ingest", headers={"Authorization": f"Bearer {token}"},
                        json={"run": {"id": "run-b"}, "points": grad_points(100, high=("layers.1",))})
    assert answer.status_code == 202, answer.text
    page.reload()
    assert "1 notification failed" in page.inner_text("#delivery-failures")
    assert page.locator("table.deliveries tbody tr.delivery-failed").count() == 2
    screenshot(page, "channel")

    page.goto(f"{console_server.url}/channels/")
    assert "team-hook" in page.inner_text("#delivery-failures")
    assert "delivery-failing" in page.locator("tr[data-channel='team-hook']").get_attribute("class")
    assert SECRET not in page.content()
    screenshot(page, "channels")
    assert errors == []
