"""In Chromium, after rewinds: the band is drawn as one shape per stretch of the current attempt (none joins across
a restart, none lies over abandoned points), and each earlier attempt is its own line in step order."""
import numpy as np
import pytest

from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]

SHAPES = """() => {
  const gd = document.querySelector('#headline-chart');
  const band = gd.data.find(t => t.name === 'band');
  const shapes = [];
  let current = [];
  band.x.forEach((x, i) => { if (x === null || band.y[i] === null) { if (current.length) shapes.push(current); current = []; } else current.push(x); });
  if (current.length) shapes.push(current);
  return { shapes, earlier: gd.data.filter(t => (t.name || '').startsWith('attempt ')).map(t => t.x) };
}"""


def test_after_rewinds_the_band_and_the_earlier_attempts_are_drawn_apart(browser, console_server, project, token, owner):
    import httpx

    from alerts.starter import install_starter_pack

    install_starter_pack(project)
    rng = np.random.default_rng(3)

    def send(steps, level):
        points = [{"step": int(s), "metric": "loss", "value": float(3 * np.exp(-s / 300) + level + rng.normal(0, 0.02))} for s in steps]
        response = httpx.post(console_server.url + "/api/v1/ingest", json={"run": {"id": "rewound"}, "points": points},
                              headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert response.status_code == 202, response.text

    send(range(0, 3000), 2.0)       # attempt 1
    send(range(1200, 2200), 2.3)    # attempt 2 resumes from 1200
    send(range(1200, 1500), 2.15)   # attempt 3 resumes from 1200 again, now at 1499
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    page.goto(console_server.url + "/runs/rewound/")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    drawn = page.evaluate(SHAPES)
    assert drawn["shapes"], "no band drawn"
    for shape in drawn["shapes"]:
        assert not (min(shape) < 1200 <= max(shape)), "a band shape joins the restart at 1200"
        assert max(shape) <= 1499, "a band shape over points the current attempt has abandoned"
    assert len(drawn["earlier"]) >= 3  # attempt 1 re-sent by 2; attempts 1 and 2 re-sent by 3
    for xs in drawn["earlier"]:
        assert all(a < b for a, b in zip(xs, xs[1:])), "an earlier attempt's line goes back on itself"
    page.locator("#headline-chart").screenshot(path=str(screenshot(page, "run-page-rewinds").parent / "band-after-rewinds.png"))
