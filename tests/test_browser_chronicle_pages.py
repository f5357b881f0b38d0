"""In Chromium with DEBUG off: from the run page to its chronicle and the project's interruptions, under the
Content-Security-Policy, with the postmortem links working (screenshots in var/screenshots/)."""
import httpx
import pytest

from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]

WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline")));
"""


def send(server, token, body):
    response = httpx.post(server.url + "/api/v1/ingest", headers={"Authorization": f"Bearer {token}"}, json=body)
    assert response.status_code == 202, response.text


def test_the_run_page_leads_to_the_chronicle_and_the_postmortem(browser, console_server, project, token, owner):
    send(console_server, token, {"run": {"id": "team/run-1"}, "points": [{"step": s, "metric": "loss", "value": 2.0} for s in range(60)]})
    send(console_server, token, {"run": {"id": "team/run-1"}, "phases": [{"step": 41, "phase": "restart"}],
                                 "points": [{"step": s, "metric": "loss", "value": 2.0} for s in range(41, 90)]})
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.add_init_script(WATCH_VIOLATIONS)
    assert page.goto(console_server.url + "/runs/team/run-1/").status == 200
    page.click("#run-chronicle-links >> text=Chronicle")
    page.wait_for_selector("#chronicle-attempts")
    assert page.url == console_server.url + "/runs/team/run-1/chronicle/"
    assert page.locator("#chronicle-attempts tbody tr").count() == 2
    assert "rewind from 59 to 41" in page.locator("#chronicle-attempts").inner_text()
    assert page.locator("#share-kept").inner_text() == f"{100 * 90 / 109:.1f}%"
    screenshot(page, "chronicle")
    for link, kind in (("#postmortem-md", "text/markdown; charset=utf-8"), ("#postmortem-json", "application/json")):
        response = page.request.get(console_server.url + page.locator(link).get_attribute("href"))
        assert response.status == 200 and response.headers["content-type"] == kind
    assert page.evaluate("() => window.__cspViolations") == []
    assert page.goto(console_server.url + f"/projects/{project.slug}/interruptions/").status == 200
    assert page.locator('#interruptions-by-cause tr[data-cause="unknown"]').count() == 1
    screenshot(page, "interruptions")
    assert page.evaluate("() => window.__cspViolations") == []
