"""In Chromium with DEBUG off: from the run page to its chronicle and the project's interruptions, under the
Content-Security-Policy, with the postmortem links working (screenshots in var/screenshots/)."""
import httpx
import pytest

from reviews.lifecycle import decide
from reviews.models import Review
from tests.browser import log_in, screenshot
from tests.factories import make_rule

pytestmark = [pytest.mark.browser]

WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline")));
"""


def send(server, token, body):
    response = httpx.post(server.url + "/api/v1/ingest", headers={"Authorization": f"Bearer {token}"}, json=body)
    assert response.status_code == 202, response.text


def test_the_run_page_leads_to_the_chronicle_and_the_postmortem(browser, console_server, project, token, owner):
    # A NaN loss at step 55 fires a `review` rule; the review decides to intervene; the job rewinds to step 41.
    make_rule(project, "nonfinite-loss", kind="nonfinite", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, response="review")
    send(console_server, token, {"run": {"id": "team/run-1"},
                                 "points": [{"step": s, "metric": "loss", "value": "NaN" if s == 55 else 2.0} for s in range(60)]})
    decide(Review.objects.get(run__run_id="team/run-1"), by=owner, decision="intervene", observation="NaN loss at step 55",
           explanations=["a corrupt batch", "an fp16 overflow"], action="restart from step 41, skipping batches 42-55")
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
    assert "planned/manual" in page.locator("#chronicle-attempts tbody tr").nth(1).inner_text()  # the decision came first
    assert page.locator("#share-kept").inner_text() == f"{100 * 90 / 109:.1f}%"
    screenshot(page, "chronicle")
    for link, kind in (("#postmortem-md", "text/markdown; charset=utf-8"), ("#postmortem-json", "application/json")):
        response = page.request.get(console_server.url + page.locator(link).get_attribute("href"))
        assert response.status == 200 and response.headers["content-type"] == kind
    assert page.evaluate("() => window.__cspViolations") == []
    assert page.goto(console_server.url + f"/projects/{project.slug}/interruptions/").status == 200
    assert page.locator('#interruptions-by-cause tr[data-cause="planned/manual"]').count() == 1
    screenshot(page, "interruptions")
    assert page.evaluate("() => window.__cspViolations") == []
