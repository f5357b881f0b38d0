"""In Chromium: a NaN and the alert it raised, at the same step, are both visible on the chart, neither hiding the other."""
import math

import pytest

from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]

MARKERS = """(name) => {
  const gd = document.querySelector('#headline-chart');
  const L = gd._fullLayout;
  const trace = gd._fullData.find(t => t.name === name);
  if (!trace) return null;
  return trace.x.map((x, i) => ({
    x: L.xaxis._offset + L.xaxis.l2p(x), y: L.yaxis2._offset + L.yaxis2.l2p(trace.y[i]), size: trace.marker.size,
    inside: L.yaxis2.l2p(trace.y[i]) >= 0 && L.yaxis2.l2p(trace.y[i]) <= L.yaxis2._length,
  }));
}"""


def test_a_nan_and_its_alert_at_one_step_are_both_visible(browser, console_server, project, token, owner):
    import httpx

    from alerts.starter import install_starter_pack

    install_starter_pack(project)
    points = [{"step": s, "metric": "loss", "value": "NaN" if s == 150 else 3.0 - s / 1000} for s in range(300)]
    response = httpx.post(console_server.url + "/api/v1/ingest", json={"run": {"id": "nan-run"}, "points": points},
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 202, response.text
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/runs/nan-run/")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    [nan] = page.evaluate(MARKERS, "non-finite")
    [alert] = page.evaluate(MARKERS, "alert")
    assert nan["inside"] and alert["inside"]
    assert abs(nan["x"] - alert["x"]) < 1  # the same step
    # Apart by more than their half sizes: each marker is drawn where the other is not.
    assert math.dist((nan["x"], nan["y"]), (alert["x"], alert["y"])) > (nan["size"] + alert["size"]) / 2 + 2
    assert page.locator("#headline-chart .scatterlayer path.point").count() >= 2
    page.locator("#headline-chart").screenshot(path=str(screenshot(page, "run-page-nan").parent / "nan-and-alert.png"))
