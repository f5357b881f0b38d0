"""In Chromium: a run's name is free text, and Plotly reads `%{...}` in a hover or a trace name as a template and
`<b>` as markup. A run named `exp-%{y}` compared with one named `<b>ref</b> %{x}` reads exactly so in the
chart's legend and in the hover of its line, not with a value or bold text in their place."""
import numpy as np
import pytest

from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]

THIS_NAME = "exp-%{y}"
OTHER_NAME = "<b>ref</b> %{x} & %{customdata}"
CHART = "#headline-chart"
# Moves the mouse onto the compared run's line at `step`, as a person pointing at it would.
POINT_AT = """(step) => {
  const gd = document.querySelector('#headline-chart');
  const L = gd._fullLayout, box = gd.getBoundingClientRect();
  const trace = gd._fullData[gd.data.findIndex(t => t.role === 'compare')];
  const i = trace.x.indexOf(step);
  return [box.left + L.xaxis._offset + L.xaxis.l2p(step), box.top + L.yaxis._offset + L.yaxis.l2p(trace.y[i])];
}"""
HOVER_TEXTS = "() => Array.from(document.querySelectorAll('#headline-chart .hoverlayer .hovertext')).map(g => g.textContent)"


@pytest.fixture
def named_runs(console_server, project, token, owner):
    import httpx

    from ingest.models import Run

    steps = np.arange(200)
    for run_id, name, floor in (("exp-7", THIS_NAME, 2.0), ("ref-5", OTHER_NAME, 1.0)):
        points = [{"step": int(s), "metric": "loss", "value": float(3.0 * np.exp(-s / 100) + floor)} for s in steps]
        response = httpx.post(console_server.url + "/api/v1/ingest", json={"run": {"id": run_id, "name": name}, "points": points},
                              headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 202, response.text
    Run.objects.filter(run_id="ref-5").update(reference=True)
    return console_server


def test_names_with_template_and_markup_characters_read_as_typed(browser, named_runs):
    page = log_in(browser, named_runs, "olivia", "pw-olivia")
    page.goto(named_runs.url + "/runs/exp-7/?compare=ref-5")
    page.wait_for_selector(f'{CHART}[data-compared="ref-5"]', timeout=15000)

    assert page.locator(f"{CHART} .legendtext").all_text_contents() == [THIS_NAME, OTHER_NAME]
    assert page.locator(f"{CHART} .legendtext b").count() == 0

    x, y = page.evaluate(POINT_AT, 150)
    page.mouse.move(x, y)
    page.wait_for_function(f"() => {HOVER_TEXTS}().length > 0", timeout=5000)
    hovers = page.evaluate(HOVER_TEXTS)
    compared = [text for text in hovers if "ref" in text]
    assert compared == [f"step 150{OTHER_NAME} {3.0 * np.exp(-1.5) + 1.0:.5g}"], hovers
    assert any(text.startswith("step 150loss ") for text in hovers), hovers  # this run's line: the metric, as before
    page.locator(CHART).screenshot(path=str(screenshot(page, "chart-names-as-typed").parent / "chart-names-as-typed.png"))
