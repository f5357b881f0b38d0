"""In Chromium: "Compare with" draws the reference run beside this one, named in the legend, and the link shares it."""
import numpy as np
import pytest

from tests.browser import log_in, screenshot

pytestmark = [pytest.mark.browser]


@pytest.fixture
def two_runs(console_server, project, token, owner):
    """This run, a reference run of the same project that went lower, and another project's run."""
    import httpx

    from ingest.models import Run

    steps = np.arange(600)
    for run_id, name, floor in (("llama-ft-7", "", 2.0), ("llama-ft-5", "last good llama", 1.2)):
        points = [{"step": int(s), "metric": "loss", "value": float(3.0 * np.exp(-s / 300) + floor)} for s in steps]
        points += [{"step": int(s), "metric": "grad_norm", "component": "layers.0", "value": floor} for s in steps]
        response = httpx.post(console_server.url + "/api/v1/ingest", json={"run": {"id": run_id, "name": name}, "points": points},
                              headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 202, response.text
    Run.objects.filter(run_id="llama-ft-5").update(reference=True)
    return console_server


def line_traces(page, selector):
    return page.evaluate(f"""() => document.querySelector('{selector}').data
        .filter(t => t.mode === 'lines' && (t.role === 'run' || t.role === 'compare'))
        .map(t => ({{name: t.name, dash: (t.line || {{}}).dash || 'solid', x: t.x.length}}))""")


def test_picking_the_reference_run_draws_it_dashed_beside_this_one(browser, two_runs):
    page = log_in(browser, two_runs, "olivia", "pw-olivia")
    page.goto(two_runs.url + "/runs/llama-ft-7/")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    assert page.locator("#compare-select optgroup[label='Reference runs'] option").all_inner_texts() == ["llama-ft-5 · last good llama"]

    page.select_option("#compare-select", "llama-ft-5")
    page.wait_for_selector('#headline-chart[data-compared="llama-ft-5"]', timeout=15000)
    lines = line_traces(page, "#headline-chart")
    assert [(t["name"], t["dash"]) for t in lines] == [("llama-ft-7", "solid"), ("last good llama", "dash")]
    assert all(t["x"] > 0 for t in lines)
    assert page.locator("#headline-chart .legendtext").all_text_contents() == ["llama-ft-7", "last good llama"]
    assert "compare=llama-ft-5" in page.url
    # The per-component charts draw the other run's same component too.
    page.wait_for_selector('.chart[data-component="layers.0"][data-compared="llama-ft-5"]', timeout=15000)
    screenshot(page, "run-compare")

    page.select_option("#compare-select", "")
    page.wait_for_function("() => !document.querySelector('#headline-chart').dataset.compared", timeout=15000)
    assert len(line_traces(page, "#headline-chart")) == 1 and "compare=" not in page.url


def test_a_shared_link_opens_zoomed_with_the_comparison(browser, two_runs):
    page = log_in(browser, two_runs, "olivia", "pw-olivia")
    with page.expect_response(lambda r: "/series/" in r.url and "compare=llama-ft-5" in r.url and "start=100" in r.url and "end=200" in r.url) as response:
        page.goto(two_runs.url + "/runs/llama-ft-7/?metric=loss&start=100&end=200&compare=llama-ft-5")
    assert response.value.json()["step"] == list(range(100, 201))
    page.wait_for_selector('#headline-chart[data-compared="llama-ft-5"]', timeout=15000)
    assert page.locator("#compare-select").input_value() == "llama-ft-5"
    assert "last good llama" in page.locator("#compare-legend").inner_text()


def test_a_link_naming_a_run_the_viewer_cannot_compare_with_draws_one_run(browser, two_runs, other_project, other_token):
    import httpx

    response = httpx.post(two_runs.url + "/api/v1/ingest", json={"run": {"id": "vision-3"}, "points": [{"step": 1, "metric": "loss", "value": 1.0}]},
                          headers={"Authorization": f"Bearer {other_token}"})
    assert response.status_code == 202
    page = log_in(browser, two_runs, "olivia", "pw-olivia")
    page.goto(two_runs.url + "/runs/llama-ft-7/?compare=vision-3")
    page.wait_for_selector('#headline-chart[data-drawn="1"]', timeout=15000)
    assert len(line_traces(page, "#headline-chart")) == 1
    assert "compare=" not in page.url and page.locator("#compare-select").input_value() == ""
