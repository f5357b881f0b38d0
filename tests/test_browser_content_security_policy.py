"""In Chromium with DEBUG off: the console's pages work under their Content-Security-Policy.

The run page, the inbox and the rules pages load with `default-src 'self'`,
no violation is reported, the charts draw and the live websockets connect.
"""
import httpx
import numpy as np
import pytest

from alerts.models import Rule
from alerts.starter import install_starter_pack
from tests.browser import log_in

pytestmark = [pytest.mark.browser]

WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push((e.target && e.target.id) + " " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
});
"""


@pytest.fixture
def console(console_server, project, token, owner):
    install_starter_pack(project)
    rng = np.random.default_rng(7)
    loss = 3.0 * np.exp(-np.arange(400) / 200) + 2.0 + rng.normal(0, 0.02, 400)
    loss[300:] += 1.5
    points = [{"step": s, "metric": "loss", "value": float(loss[s])} for s in range(400)]
    points += [{"step": s, "metric": "grad_norm", "component": f"layers.{i}", "value": "NaN" if s == 350 and i == 1 else 1.0}
               for s in range(400) for i in range(2)]
    response = httpx.post(console_server.url + "/api/v1/ingest", headers={"Authorization": f"Bearer {token}"},
                          json={"run": {"id": "csp-run"}, "phases": [{"step": 0, "phase": "warmup"}, {"step": 40, "phase": "steady"}],
                                "points": points})
    assert response.status_code == 202, response.text
    return console_server


@pytest.fixture
def page(browser, console):
    page = log_in(browser, console, "olivia", "pw-olivia")
    page.add_init_script(WATCH_VIOLATIONS)
    console_messages = []
    page.on("console", lambda m: console_messages.append(m.text) if "Content Security Policy" in m.text else None)
    page.console_messages = console_messages
    return page


def visit(page, url):
    response = page.goto(url)
    assert response.status == 200
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self';" in policy and "unsafe-eval" not in policy
    return policy


def assert_no_violations(page):
    assert page.evaluate("() => window.__cspViolations") == []
    assert page.console_messages == []


def test_the_run_page_draws_its_charts_and_goes_live_under_the_policy(page, console):
    visit(page, console.url + "/runs/csp-run/")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    page.wait_for_selector("body[data-charts-drawn]", timeout=30000)
    page.wait_for_selector('body[data-live="open"]', timeout=10000)
    # Plotly drew: SVG with the traces, the band and the alert marker.
    assert page.locator("#headline-chart .main-svg .scatterlayer .trace").count() >= 3
    names = page.evaluate("() => document.querySelector('#headline-chart').data.map(t => t.name || '')")
    assert {"loss", "band", "alert"} <= set(names)
    assert_no_violations(page)


def test_the_inbox_and_runs_list_go_live_under_the_policy(page, console):
    for path in ("/inbox/", "/"):
        visit(page, console.url + path)
        page.wait_for_selector('body[data-live="open"]', timeout=10000)  # its script ran and the websocket connected
        assert_no_violations(page)
    assert page.locator("tr[data-run]").count() == 1


def test_the_rules_pages_under_the_policy(page, console, project):
    rule = Rule.objects.get(project=project, name="loss-spike")
    for path in ("/rules/", f"/rules/{rule.pk}/", f"/rules/{rule.pk}/edit/", "/rules/new/"):
        visit(page, console.url + path)
        page.wait_for_load_state("networkidle")
        assert_no_violations(page)
