"""In Chromium, the run page's charts get the small things right: a run's only finite point is drawn, the step axis
reads whole steps, the legend names only the phases the run had, restart labels close together do not print over
each other, and a zoom is in the address bar, so the link opens the same view."""
import pytest

from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]

CHART = "#headline-chart"
STEP_TICKS = "() => Array.from(document.querySelectorAll('#headline-chart .xtick text')).map(t => t.textContent)"
# Whether a marker is drawn where (step, value) falls on the headline chart (NaN markers lie along the bottom edge).
DRAWN_AT = """([step, value]) => {
  const gd = document.querySelector('#headline-chart');
  const L = gd._fullLayout, box = gd.getBoundingClientRect();
  const x = box.left + L.xaxis._offset + L.xaxis.l2p(step), y = box.top + L.yaxis._offset + L.yaxis.l2p(value);
  return Array.from(gd.querySelectorAll('.scatterlayer path.point')).some(p => {
    const r = p.getBoundingClientRect();
    return r.width > 0 && Math.abs((r.left + r.right) / 2 - x) < 3 && Math.abs((r.top + r.bottom) / 2 - y) < 3;
  });
}"""
X_RANGE = "() => document.querySelector('#headline-chart')._fullLayout.xaxis.range"


def send(server, token, run, points, phases=()):
    import httpx

    response = httpx.post(server.url + "/api/v1/ingest", json={"run": {"id": run}, "points": points, "phases": list(phases)},
                          headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert response.status_code == 202, response.text


def open_run(page, server, run, query=""):
    page.goto(server.url + f"/runs/{run}/" + query)
    page.wait_for_selector(f'{CHART}[data-drawn="1"]', timeout=15000)


def whole_steps(ticks):
    assert ticks, "the step axis has no tick labels"
    # Plotly writes large numbers with a thin space and k/M suffixes; whole steps have no decimal point.
    assert all("." not in t for t in ticks), f"the step axis reads fractions of a step: {ticks}"


def test_one_finite_point_is_drawn_on_whole_steps(browser, console_server, project, token, owner):
    send(console_server, token, "one-point", [{"step": 5, "metric": "loss", "value": 2.5},
                                              {"step": 6, "metric": "loss", "value": "NaN"}])
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    open_run(page, console_server, "one-point")
    drawn = page.evaluate(DRAWN_AT, [5, 2.5])
    assert drawn, "the run's one finite value (step 5) is not drawn"
    whole_steps(page.evaluate(STEP_TICKS))


def test_legend_ticks_and_a_shared_zoom(browser, console_server, project, token, owner):
    points = [{"step": s, "metric": "loss", "value": 3.0 - s / 1000} for s in range(300)]
    send(console_server, token, "warm-steady", points, [{"step": 0, "phase": "warmup"}, {"step": 50, "phase": "steady"}])
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    open_run(page, console_server, "warm-steady")
    assert page.locator(".legend span:has(.sw-phase-warmup)").is_visible()
    for never in ("eval", "checkpoint", "restart", "data_refresh"):
        assert page.locator(f".legend span:has(.sw-phase-{never})").is_hidden(), f"the legend lists {never}, which the run never had"
    whole_steps(page.evaluate(STEP_TICKS))

    page.evaluate(f"() => Plotly.relayout(document.querySelector('{CHART}'), {{'xaxis.range': [100.4, 104.6]}})")
    page.wait_for_function("() => new URL(location.href).searchParams.get('end') === '105'", timeout=10000)
    q = page.evaluate("() => Object.fromEntries(new URL(location.href).searchParams)")
    assert q == {"metric": "loss", "start": "100", "end": "105"}
    shared = page.url
    page.reload()
    page.wait_for_selector(f'{CHART}[data-drawn="1"]', timeout=15000)
    assert page.url == shared
    assert page.evaluate(X_RANGE) == [100, 105]
    whole_steps(page.evaluate(STEP_TICKS))

    page.click("#reset-zoom")
    page.wait_for_function("() => !new URL(location.href).searchParams.has('start')", timeout=10000)
    assert "end=" not in page.url


def test_restart_labels_close_together_do_not_overlap(browser, console_server, project, token, owner):
    """Three restarts within 200 steps of a 3,000-step run (as near step 122k of pythia-410m-seed4), and a decay."""
    def loss(steps, level):
        return [{"step": s, "metric": "loss", "value": 3.0 - s / 2000 + level} for s in steps]

    send(console_server, token, "fell-over", loss(range(0, 3000), 0),
         [{"step": 0, "phase": "warmup"}, {"step": 100, "phase": "steady"}, {"step": 2500, "phase": "lr_decay"}])
    send(console_server, token, "fell-over", loss(range(1200, 2200), 0.1))  # restart at 1200
    send(console_server, token, "fell-over", loss(range(1300, 1600), 0.2))  # restart at 1300
    send(console_server, token, "fell-over", loss(range(1400, 1500), 0.3))  # restart at 1400
    page = log_in(browser, console_server, "olivia", "pw-olivia")
    violations = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    open_run(page, console_server, "fell-over")
    # The legend follows the run: its restarts and its decay (shaded, so named) are listed, an eval it never had is not.
    for had in ("warmup", "restart", "lr_decay"):
        assert page.locator(f".legend span:has(.sw-phase-{had})").is_visible(), f"the legend leaves out {had}"
    assert page.locator(".legend span:has(.sw-phase-eval)").is_hidden()
    boxes = page.evaluate(f"""() => Array.from(document.querySelectorAll('{CHART} .annotation-text-g')).map(g => {{
      const r = g.getBoundingClientRect(); return {{ l: r.left, r: r.right, t: r.top, b: r.bottom, text: g.textContent }}; }})""")
    labels = [b for b in boxes if "restart" in b["text"]]
    assert labels, "no restart is labelled"
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            assert a["r"] <= b["l"] or b["r"] <= a["l"] or a["b"] <= b["t"] or b["b"] <= a["t"], f"{a['text']!r} overlaps {b['text']!r}"
    # Every restart is still told: on its own label or in the hover of the label it was folded into.
    told = page.evaluate(f"() => document.querySelector('{CHART}').layout.annotations.map(a => a.text + ' ' + (a.hovertext || '')).join(' ')")
    for from_step in (2999, 2199, 1599):
        assert f"rewind from {from_step}" in told
    assert violations == []
    page.locator(CHART).screenshot(path=str(screenshot(page, "run-page-restart-labels").parent / "restart-labels.png"))
