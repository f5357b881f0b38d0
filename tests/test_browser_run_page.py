"""In Chromium: log in, the runs list, a run page with its band and an alert marker, zoom fetches finer data."""
import numpy as np
import pytest

from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]


@pytest.fixture
def run_with_spike(console_server, project, token, owner):
    """A loss jump at step 500 in a run with warmup, an eval and a checkpoint, sent through the real server."""
    import httpx

    from alerts.starter import install_starter_pack

    install_starter_pack(project)
    rng = np.random.default_rng(1)
    loss = 3.0 * np.exp(-np.arange(600) / 300) + 2.0 + rng.normal(0, 0.02, 600)
    loss[500:] += 1.5  # from step 500 on: still open when the page is looked at
    points = [{"step": s, "metric": "loss", "value": float(loss[s])} for s in range(600)]
    points += [{"step": s, "metric": "grad_norm", "component": f"layers.{i}", "value": float(1 + 0.05 * rng.normal())}
               for s in range(600) for i in range(3)]
    phases = [{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}, {"step": 200, "phase": "eval"},
              {"step": 205, "phase": "steady"}, {"step": 300, "phase": "checkpoint"}, {"step": 302, "phase": "steady"}]
    response = httpx.post(console_server.url + "/api/v1/ingest", json={"run": {"id": "llama-ft-7", "tags": {"team": "pretrain"}},
                          "phases": phases, "points": points}, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 202, response.text
    return console_server


def chart_traces(page, selector):
    return page.evaluate(f"() => document.querySelector('{selector}').data.map(t => t.name || '')")


def test_an_on_call_reviewer_logs_in_and_sees_the_band_and_the_alert_marker(browser, run_with_spike):
    page = log_in(browser, run_with_spike, "olivia", "pw-olivia")
    assert page.locator('tr[data-run="llama-ft-7"] .status-alerting').is_visible()
    screenshot(page, "runs-list")

    page.click('tr[data-run="llama-ft-7"] a.run-link')
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    names = chart_traces(page, "#headline-chart")
    assert "band" in names and "alert" in names and "loss" in names
    # The alert marker sits at the spike's first step.
    marker = page.evaluate("() => document.querySelector('#headline-chart').data.find(t => t.name === 'alert').x")
    assert marker == [500]
    assert page.locator("#run-alerts").get_by_text("loss-spike").is_visible()
    page.wait_for_selector("body[data-charts-drawn]", timeout=30000)
    screenshot(page, "run-page")


def test_zooming_fetches_finer_data(browser, run_with_spike):
    page = log_in(browser, run_with_spike, "olivia", "pw-olivia")
    page.goto(run_with_spike.url + "/runs/llama-ft-7/")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    with page.expect_response(lambda r: "/series/" in r.url and "start=480" in r.url) as response:
        page.evaluate("() => Plotly.relayout(document.querySelector('#headline-chart'), {'xaxis.range[0]': 480, 'xaxis.range[1]': 520})")
    body = response.value.json()
    assert body["resolution"] == "raw" and body["bucket_steps"] == 1 and 500 in body["step"]


def test_new_points_and_a_new_alert_arrive_while_the_page_is_open(browser, run_with_spike, token):
    import httpx

    page = log_in(browser, run_with_spike, "olivia", "pw-olivia")
    page.goto(run_with_spike.url + "/runs/llama-ft-7/")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    page.wait_for_selector('body[data-live="open"]', timeout=10000)
    before = page.locator("#run-open-alerts").inner_text()
    points = [{"step": s, "metric": "loss", "value": 3.5} for s in range(600, 640)]
    points += [{"step": 640, "metric": "weight_norm", "component": "layers.1", "value": "NaN"}]
    response = httpx.post(run_with_spike.url + "/api/v1/ingest", json={"run": {"id": "llama-ft-7"}, "points": points},
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 202
    # No reload: the last step, the open-alert count and the charts follow the websocket.
    page.wait_for_function("() => document.getElementById('run-last-step').textContent.trim() === '640'", timeout=10000)
    page.wait_for_function(f"() => document.getElementById('run-open-alerts').textContent.trim() !== '{before}'", timeout=10000)
    page.wait_for_function("() => WLRun.data.alerts.some(a => a.component === 'layers.1' && a.rule.name === 'nonfinite-weights')")
    assert page.locator("#run-alerts tr.live-new").filter(has_text="nonfinite-weights").filter(has_text="layers.1").is_visible()
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1


def test_a_restart_is_drawn_as_its_own_attempt(browser, console_server, project, token, owner):
    import httpx

    def send(body):
        response = httpx.post(console_server.url + "/api/v1/ingest", json=body, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 202, response.text

    send({"run": {"id": "resumed"}, "points": [{"step": s, "metric": "loss", "value": 3.0 - s / 1000} for s in range(300)]})
    send({"run": {"id": "resumed"}, "phases": [{"step": 201, "phase": "restart"}, {"step": 202, "phase": "steady"}],
          "points": [{"step": s, "metric": "loss", "value": 2.9 - s / 1000} for s in range(201, 400)]})
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/runs/resumed/")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    names = chart_traces(page, "#headline-chart")
    assert "attempt 1 (re-sent by 2)" in names
    earlier = page.evaluate("() => document.querySelector('#headline-chart').data.find(t => (t.name || '').startsWith('attempt 1')).x")
    assert earlier[0] == 201 and earlier[-1] == 299
    assert page.get_by_text("back from 299 to 201").is_visible()
    screenshot(page, "run-page-restart")
