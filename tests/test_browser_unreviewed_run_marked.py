"""In Chromium: a finished run whose loss spike ended by itself with nobody's word on it is not shown as plainly
healthy: the runs list and the run page mark it "needs review", and the mark leads to the inbox, which names it."""
import httpx
import pytest

from tests.browser import log_in, screenshot
from tests.factories import make_rule

pytestmark = [pytest.mark.browser]


def test_a_finished_run_with_an_unjudged_spike_is_marked_on_the_runs_list_and_its_page(browser, console_server, project,
                                                                                        token, owner):
    make_rule(project, "loss-high", kind="threshold", scope={"metrics": ["loss"]},
              persistence={"points": 1, "resolve_points": 3}, params={"above": 10.0})
    points = [{"step": s, "metric": "loss", "value": 20.0 if s in (21, 22) else 2.0} for s in range(60)]
    response = httpx.post(console_server.url + "/api/v1/ingest", headers={"Authorization": f"Bearer {token}"},
                          json={"run": {"id": "seed4", "budget": {"steps": 59}}, "points": points})
    assert response.status_code == 202, response.text
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    row = page.locator('tr[data-run="seed4"]')
    assert row.locator(".status-finished").is_visible()
    assert row.locator(".status-needs-review").is_visible()
    screenshot(page, "runs-list-needs-review")
    row.locator(".status-needs-review").click()
    page.wait_for_selector("#inbox-needs-review")
    assert page.locator("#inbox-needs-review a", has_text="seed4").is_visible()
    assert "but 1 run needs review" in page.locator("#inbox-empty").inner_text()
    page.set_viewport_size({"width": 1366, "height": 768})
    assert page.goto(console_server.url + "/runs/seed4/").status == 200
    assert page.locator("#run-needs-review").is_visible()
    assert "loss-high at step 21" in page.locator("#run-needs-review-why").inner_text()
