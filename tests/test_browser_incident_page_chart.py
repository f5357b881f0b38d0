"""In Chromium, under the Content-Security-Policy: an incident's page draws its chart itself, the run page's charts
(static/js/run.js, the series API) on its first alert's series and the run's headline metric, opened on the
incident's steps with its alerts marked; "Chart at its steps" still links to the run page. At 360 px it draws
within the screen."""
import httpx
import numpy as np
import pytest

from alerts.incidents import group_new_alerts
from ingest.models import Run
from tests.browser import log_in
from tests.factories import make_alert, make_rule

pytestmark = [pytest.mark.browser]

WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline")));
"""


@pytest.fixture
def incident(console_server, project, token, owner):
    rng = np.random.default_rng(3)
    loss = 3.0 * np.exp(-np.arange(600) / 200) + 2.0 + rng.normal(0, 0.02, 600)
    points = [{"step": s, "metric": "loss", "value": float(loss[s])} for s in range(600)]
    points += [{"step": s, "metric": "weight_norm", "component": "layers.4", "value": 10.0 if s < 300 else 14.0} for s in range(600)]
    response = httpx.post(console_server.url + "/api/v1/ingest", headers={"Authorization": f"Bearer {token}"},
                          json={"run": {"id": "chart-run"}, "points": points})
    assert response.status_code == 202, response.text
    rule = make_rule(project, "weight-jump", kind="threshold", scope={"metrics": ["weight_norm"]}, response="review")
    make_alert(rule, "chart-run", "layers.4", metric="weight_norm", first_step=300)
    [made] = group_new_alerts(Run.objects.get(run_id="chart-run"))
    return made


def drawn(page, metric):
    chart = f'.incident-chart[data-metric="{metric}"]'
    page.wait_for_selector(f'{chart}[data-drawn="1"]', timeout=15000)
    return page.evaluate(f"""() => {{ const el = document.querySelector('{chart}');
        return {{ names: el.data.map(t => t.name || ''), range: el.layout.xaxis.range,
                  alerts: el.data.filter(t => t.name === 'alert').map(t => t.x) }}; }}""")


def test_the_incident_page_draws_its_chart_at_its_steps(browser, console_server, incident):
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.add_init_script(WATCH_VIOLATIONS)
    response = page.goto(f"{console_server.url}/incidents/{incident.pk}/")
    assert response.status == 200 and "script-src 'self';" in response.headers["content-security-policy"]
    weights = drawn(page, "weight_norm")
    assert page.locator('.incident-chart[data-metric="weight_norm"]').get_attribute("data-component") == "layers.4"
    assert "weight_norm" in weights["names"] and weights["alerts"] == [[300]]  # its alert, marked at its step
    assert [round(x) for x in weights["range"]] == [200, 401]  # its steps, 100 either side
    loss = drawn(page, "loss")  # the run's headline metric, over the same steps
    assert "loss" in loss["names"] and [round(x) for x in loss["range"]] == [200, 401]
    assert page.locator("#incident-chart").get_attribute("href").startswith("/runs/chart-run/?metric=weight_norm")
    assert page.evaluate("() => window.__cspViolations") == []

    page.click("#reset-zoom")  # the whole run, on the same page
    page.wait_for_function("""() => { const r = document.querySelector('.incident-chart[data-metric="loss"]').layout.xaxis.range;
                                      return r && r[0] < 50 && r[1] > 550; }""", timeout=10000)

    page.set_viewport_size({"width": 360, "height": 740})
    page.goto(f"{console_server.url}/incidents/{incident.pk}/")
    drawn(page, "weight_norm")
    assert page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 1
    box = page.locator('.incident-chart[data-metric="weight_norm"]').bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 361
